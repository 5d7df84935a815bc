"""Records shown to people: the terminal's verdict table and a results store's report (docs/report.md).

- `table.py`: the terminal view of a record: a verdict table rendered with rich;
- `markdown.py`: the report's text: the summary and the per-task best-of-K claims as Markdown;
- `page.py`: a results store as one self-contained HTML page;
- `plots.py`: the page's plots, drawn by matplotlib as inline SVG.
"""

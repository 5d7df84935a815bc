"""The environment variables the parent starts a worker with, by name (read in worker/, set in
judge/stages/workers.py)."""

# A candidate's worker readies Triton as it starts (worker/prepare.py): a candidate that declares a Triton kernel,
# the timing pair, a spare pair.
PREPARE_TRITON_ENV = "KJ_PREPARE_TRITON"

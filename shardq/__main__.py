"""`python -m shardq` runs the command line (same as the `shardq` console script)."""

from shardq.cli import app

if __name__ == "__main__":
    app(prog_name="shardq")

"""Snakemake script of rule `sharing_benchmark`: the config's ``sharing`` section, its schema's
defaults filled in, passed to `benchmarks.sharing.run` as it is (TensorSocket installed
beside the project first when a mode needs it; the project never imports it).

Everything the benchmark prints, its trial processes' and the installer's output included,
goes to the rule's log.
"""

import os
import subprocess
import sys

snakemake = globals()["snakemake"]  # injected by Snakemake's `script:` directive
sys.path.insert(0, os.getcwd())  # as `python -m` would: the benchmarks are not installed
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"  # read by TensorFlow in the trials it starts
options = snakemake.config["sharing"]
with open(snakemake.log[0], "w") as log:
    for stream in (sys.stdout, sys.stderr):  # file descriptors: forked trials write there too
        stream.flush()
        os.dup2(log.fileno(), stream.fileno())
    sys.stdout.reconfigure(line_buffering=True)  # a forked trial inherits no unwritten lines
    if "tensorsocket" in options["modes"]:
        subprocess.run(["benchmarks/install_tensorsocket.sh"], check=True)

    from benchmarks.sharing import run

    run(snakemake.output[0], options, tensorsocket_path=".bench-deps/tensorsocket")

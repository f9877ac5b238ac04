"""One caption per figure, for the report and ``snakemake --report``."""

from __future__ import annotations

__all__ = ["CAPTIONS"]

_RELATIVE = (
    "Relative values divide each run's count to target by the median of its baseline: the "
    "runs of the same study without an echo stage that share its workload, batch size, "
    "upstream cost, workers and target. Markers or bars are the median over seeds, error "
    "bars the minimum and maximum; 'k/n' marks configurations where only k of n seeds "
    "reached the target (medians use those k)."
)
_PAPER = (
    "Black-edged stars are the values the papers report (paper_figures/reference/papers.csv),"
    " coloured by insertion point where the paper names one; reported values with no "
    "matching point are listed under the figure."
)

CAPTIONS = {
    "fresh_by_echo_point": (
        "Fresh examples (read from storage) needed to reach the target, relative to the "
        "no-echo baseline, per workload at echo factor e = 2: baseline, batch echoing, and "
        "example echoing after and before augmentation (language models have no "
        "augmentation and show only the points they have). The dashed line is the ideal "
        f"1/e = 0.5, where every repeated example is as useful as a fresh one. {_RELATIVE} "
        f"{_PAPER}"
    ),
    "fresh_vs_echo_factor": (
        "Fresh examples to target relative to the baseline against the echo factor e "
        "(log2 axes, up to 16), one panel per workload and one line per insertion point; "
        f"the baseline is the point at e = 1 and the dashed line the ideal 1/e. {_RELATIVE} "
        f"{_PAPER}"
    ),
    "wall_time_vs_echo_factor": (
        "Left: wall time to target (training time, evaluation excluded) relative to the "
        "baseline against the echo factor, with speedup = 1 / relative wall time on the "
        "right axis; the dotted line is the ideal max(1/e, 1/R), where R is the baseline's "
        "measured ratio of upstream time per batch to training-step time (written in each "
        "panel). Right: fresh examples to target relative to the baseline, ideal 1/e dashed. "
        "One row per workload and upstream setting, one line per insertion point. "
        f"{_RELATIVE} {_PAPER} Reported speedups are drawn at 1/speedup."
    ),
    "batch_size": (
        "Fresh examples to target relative to the baseline at the same batch size, against "
        "batch size (log2 axis), one line per insertion point and echo factor, ideal 1/e "
        f"dashed. {_RELATIVE} {_PAPER}"
    ),
    "shuffle_buffer": (
        "Fresh examples to target relative to the baseline against the size of the shuffle "
        "buffer after the echo stage (symmetric-log axis; 0 keeps an example's copies "
        "adjacent), one line per insertion point and echo factor; the grey line is the "
        f"baseline (1) and the dashed line the ideal 1/e. {_RELATIVE} {_PAPER}"
    ),
    "no_harm": (
        "Top: the best value of the target metric each run reached within its fixed budget "
        "of fresh examples (runs that trained on to the budget instead of stopping at the "
        "target), for the baseline and each echo configuration; median over seeds with "
        "min-max bars; the dashed line is the target, and the axis says whether higher or "
        "lower is better. Bottom: the metric against fresh examples read, median over seeds "
        f"(seeds interpolated onto common points) with the min-max range shaded. {_PAPER}"
    ),
    "sharing_throughput": (
        "Batches per second each training process (consumer) receives against the number "
        "of consumers, per loading mode: each consumer with its own loader, our shared "
        "loader, TensorSocket and the tf.data service; one column per benchmark workload "
        "(images: cheap in-memory 224x224 images, so transport dominates; cpu: samples that "
        "each take about 2 ms of CPU). Bottom: "
        "relative to own loaders at the same number of consumers. Hollow markers: trials "
        f"where not every consumer finished. {_PAPER}"
    ),
    "sharing_cpu": (
        "CPU seconds (all processes of a trial) per sample delivered to a consumer against "
        "the number of consumers, per loading mode, from the benchmark's CPU milliseconds "
        "per batch received divided by its 64 samples per batch; bottom: relative to own "
        f"loaders at the same number of consumers. Hollow markers: unfinished trials. {_PAPER}"
    ),
    "echo_on_stall": (
        "Training steps per second relative to no echoing against the measured ratio R of "
        "upstream to downstream time per batch (simulated upstream latency), for batch "
        "echoing with fixed factors and for EchoOnStall, which echoes only while the next "
        "fresh batch is late (up to its maximum factor). Dashed: the ideal min(e, R). "
        f"{_PAPER}"
    ),
}
"""Figure name -> one-paragraph caption."""

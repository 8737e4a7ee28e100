"""From text files to padded id tensors: corpora, the Multi30k and WMT14 downloads, subwords and batching.

The flow: `iter_parallel` (or `read_tsv`) -> `Tokenizer.encode_*_batch` -> `filter_pairs` (all three
run by `prepare.prepare` for a training corpus, in worker processes) -> `TokenBatchSampler.batches(epoch)`
-> `collate` -> `Batch`.

The public names are imported on first use (PEP 562): the encoding workers of `prepare` import this
package and must not pay for torch, which only `batching` needs.
"""

from tnmt.exports import lazy_exports

_HOMES = {
    "Batch": "tnmt.data.batching",
    "ParallelCorpus": "tnmt.data.corpus",
    "TokenBatchSampler": "tnmt.data.batching",
    "Tokenizer": "tnmt.data.tokenizer",
    "collate": "tnmt.data.batching",
    "fetch_multi30k": "tnmt.data.multi30k",
    "fetch_wmt14": "tnmt.data.wmt14",
    "filter_pairs": "tnmt.data.corpus",
    "find_multi30k": "tnmt.data.multi30k",
    "iter_lines": "tnmt.data.corpus",
    "iter_parallel": "tnmt.data.corpus",
    "multi30k_paths": "tnmt.data.multi30k",
    "read_lines": "tnmt.data.corpus",
    "read_parallel": "tnmt.data.corpus",
    "read_tsv": "tnmt.data.corpus",
}
__all__ = sorted(_HOMES)

__getattr__, __dir__ = lazy_exports(__name__, _HOMES)

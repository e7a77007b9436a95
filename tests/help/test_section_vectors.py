"""The section embeddings help ships (store/section_vectors.py): the committed table holds exactly
the current docs' passages for the current model, its vectors are what the model computes, and
a help index embeds only the passages the table lacks."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from loom_core.embedding import MODEL_ID, LocalModel
from loom_help.domain import hybrid
from loom_help.service.help import HelpService, build_index
from loom_help.store import section_vectors
from loom_help.store.pages import read_pages, shipped_docs_dir

from tests.help.counting import CountingModel
from tests.scripts import load_script

gen_help_vectors = load_script("gen_help_vectors")


def test_the_shipped_table_holds_the_current_docs_passages() -> None:
    assert gen_help_vectors.main(["--check"]) == 0, "section_vectors.npz is stale: run python scripts/gen_help_vectors.py"


def test_the_shipped_vectors_are_the_models_own() -> None:
    table = section_vectors.load(MODEL_ID)
    index = build_index(read_pages(shipped_docs_dir()))
    passages = [hybrid.passage(index, s) for s in index.sections][::60]
    fresh = LocalModel().encode(passages)
    stored = np.stack([table[section_vectors.passage_key(p)] for p in passages])
    # Each text runs alone (LocalModel._encode), but the int8 kernels differ between CPUs: the
    # table was computed on an Intel machine, and an AMD EPYC with AVX2 and no VNNI gives the same
    # passages cosine 0.977-0.989 to it. Another model's vectors, or a table built from other
    # passages, fall far below this.
    assert np.min(np.sum(fresh * stored, axis=1)) > 0.97


def test_a_table_from_another_model_is_not_used(tmp_path: Path) -> None:
    path = tmp_path / "vectors.npz"
    section_vectors.save(path, "another-model", {"k": np.ones(384, np.float32)})
    assert section_vectors.load("another-model", path).keys() == {"k"}
    assert section_vectors.load(MODEL_ID, path) == {}
    assert section_vectors.load(MODEL_ID, tmp_path / "absent.npz") == {}


async def test_an_index_of_the_shipped_docs_embeds_only_what_the_table_lacks(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    for rel, text in read_pages(shipped_docs_dir()).pages[:6]:
        (docs / rel).parent.mkdir(parents=True, exist_ok=True)
        (docs / rel).write_text(text)
    (docs / "edited.md").write_text(f"# Edited\n\nA page the shipped table has never seen: {tmp_path}\n")
    model = CountingModel()
    svc = HelpService(docs, model=model)
    assert await svc.hybrid_ready()
    index = await svc.index()
    assert index is not None and svc.vectors is not None
    assert len(model.texts) == 1 and str(tmp_path) in model.texts[0]
    assert svc.vectors.shape == (len(index.sections), model.dimensions)

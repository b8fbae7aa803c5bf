"""The canitoolcall adapter's own parts: its units and its format table. The suite itself runs
through it in tests/conformance (a baseline of every fixture's status)."""

from __future__ import annotations

from canitoolcall.fixtures import load_families, load_fixtures

from toolshim.adapters.canitoolcall import ToolshimAdapter, _markers, format_for, pieces


def test_units_are_pieces_that_join_to_the_output_with_markers_whole():
    families = load_families()
    for fixture in load_fixtures():
        markers = _markers(fixture.family)
        text = fixture.raw_output
        split, special = pieces(text, markers)
        assert "".join(split) == text
        for idx in special:
            assert split[idx] in markers
        count = sum(text.count(m) for m in markers)  # markers never overlap in the fixtures
        assert len(special) == count, fixture.id
        assert format_for(fixture.family, fixture.reference_model), fixture.id
        assert fixture.family in families
    adapter = ToolshimAdapter()
    assert adapter.supports("qwen3-hermes", "Qwen/Qwen3-0.6B")
    assert not adapter.supports("unknown-family", "m")
    assert format_for("deepseek", "deepseek-ai/DeepSeek-V3.1") == "deepseek_v31"
    assert format_for("kimi", "moonshotai/Kimi-K3") == "kimi_k3"
    assert format_for("mistral", "mistralai/Magistral-Small-2509") == "mistral_v11"
    assert format_for("llama", "meta-llama/Llama-4-Scout-17B-16E-Instruct") == "pythonic"

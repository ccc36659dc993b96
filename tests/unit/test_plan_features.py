"""Node labels -> Slurm features (syncer/controllers/attributes/features.py): pure."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from syncer.controllers.attributes.features import FEATURE, FeatureLabel, wanted, with_owned

GPU = FeatureLabel.parse("nvidia.com/gpu.product")


def test_spec_names_default_to_the_key_after_its_last_slash() -> None:
    assert FeatureLabel("nvidia.com/gpu.product", "gpu.product") == GPU
    assert FeatureLabel.parse("node.kubernetes.io/instance-type=itype") == FeatureLabel(
        "node.kubernetes.io/instance-type", "itype"
    )
    assert FeatureLabel.parse("plain").name == "plain"


@pytest.mark.parametrize("spec", ["", "=x", "example.com/a=b=c", "example.com/a=with space", "k=a:b"])
def test_spec_refuses_names_slurm_cannot_take(spec: str) -> None:
    with pytest.raises(ValueError, match="feature label"):
        FeatureLabel.parse(spec)


def test_values_give_features_true_alone_false_and_absent_none() -> None:
    specs = (GPU, FeatureLabel.parse("example.com/ib=ib"), FeatureLabel.parse("example.com/nvme"))
    labels = {
        "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
        "example.com/ib": "true",
        "example.com/nvme": "false",
    }
    assert wanted(labels, specs, "k8s.").owned == ("k8s.gpu.product:NVIDIA-H100-80GB-HBM3", "k8s.ib")
    assert wanted({}, specs, "k8s.").owned == ()
    assert wanted({"example.com/ib": ""}, specs, "k8s.").owned == ()


def test_a_value_slurm_cannot_take_is_refused_with_the_label_named() -> None:
    result = wanted({"nvidia.com/gpu.product": "h100=sxm"}, (GPU,), "k8s.")
    assert result.owned == ()
    (refused,) = result.refused
    assert refused.label == "nvidia.com/gpu.product" and refused.value == "h100=sxm"
    assert "nvidia.com/gpu.product" in refused.message and "'='" in refused.message


def test_only_prefixed_features_change_and_the_others_keep_their_order() -> None:
    current = ("zeta", "k8s.gpu:a100", "alpha", "k8s.old")
    assert with_owned(current, ("k8s.gpu:h100",), "k8s.") == ("zeta", "alpha", "k8s.gpu:h100")
    assert with_owned(current, ("k8s.old", "k8s.gpu:a100"), "k8s.") is None  # already so: no write
    assert with_owned(("admin",), (), "k8s.") is None


label_values = st.text(alphabet="abcAB09._-=: /", max_size=12)


@given(
    st.dictionaries(st.sampled_from(["a/x", "b/y", "c"]), label_values),
    st.lists(st.text("abk8s.:", max_size=6)),
)
def test_merging_never_touches_foreign_features_and_is_idempotent(
    labels: dict[str, str], current: list[str]
) -> None:
    specs = tuple(FeatureLabel.parse(k) for k in ("a/x", "b/y", "c"))
    result = wanted(labels, specs, "k8s.")
    assert all(FEATURE.fullmatch(f) and f.startswith("k8s.") for f in result.owned)
    assert len(result.owned) + len(result.refused) <= len(specs)
    merged = with_owned(current, result.owned, "k8s.")
    after = tuple(current) if merged is None else merged
    assert [f for f in after if not f.startswith("k8s.")] == [f for f in current if not f.startswith("k8s.")]
    assert {f for f in after if f.startswith("k8s.")} == set(result.owned)
    assert with_owned(after, result.owned, "k8s.") is None


def test_a_spec_names_the_label_after_its_last_slash_and_says_how_to_name_it() -> None:
    assert FeatureLabel.parse("example.com/sub/gpu").name == "gpu"  # the last path element, not "sub/gpu"
    with pytest.raises(ValueError) as caught:
        FeatureLabel.parse("example.com/a=with space")
    assert str(caught.value) == (
        "feature label 'example.com/a=with space': the name 'with space' is no Slurm feature name "
        "(letters, digits, '.', '_', '-'); give one with KEY=NAME"
    )


def test_every_label_is_looked_at_whatever_comes_before_it() -> None:
    """An absent, false or refused label does not end the look at the labels after it."""
    ib = FeatureLabel.parse("example.com/ib=ib")
    assert wanted({"example.com/ib": "true"}, (GPU, ib), "k8s.").owned == ("k8s.ib",)
    assert wanted({GPU.key: "false", "example.com/ib": "true"}, (GPU, ib), "k8s.").owned == ("k8s.ib",)
    result = wanted({GPU.key: "h100 sxm=2", "example.com/ib": "true"}, (GPU, ib), "k8s.")
    assert result.owned == ("k8s.ib",)
    (refused,) = result.refused
    assert refused.why == "Slurm takes only letters, digits and . _ - : (not ' =')"

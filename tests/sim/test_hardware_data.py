"""Chip and instance data files: every number carries its source, and the facts hold together."""

import math
import tomllib

import pytest

from sim.errors import UnknownNameError
from sim.hardware.chip import DATA_DIR, all_chips, get_chip
from sim.hardware.instances import all_instances, default_instance, get_instance


def _numbers_without_source(node, path=""):
    if isinstance(node, dict):
        if "value" in node:
            return [] if node.get("source") else [path]
        return [p for k, v in node.items() for p in _numbers_without_source(v, f"{path}.{k}")]
    if isinstance(node, list):
        return [p for i, v in enumerate(node) for p in _numbers_without_source(v, f"{path}[{i}]")]
    if isinstance(node, (int, float)) and not isinstance(node, bool):
        return [path]
    return []


@pytest.mark.parametrize("path", sorted(DATA_DIR.glob("*.toml")), ids=lambda p: p.name)
def test_every_number_in_a_data_file_has_a_source(path):
    with open(path, "rb") as f:
        doc = tomllib.load(f)
    assert _numbers_without_source(doc) == []


def test_all_five_generations_are_known_by_key_and_alias():
    assert list(all_chips()) == ["inf1", "inf2", "trn1", "trn2", "trn3"]
    assert get_chip("Trainium3").key == "trn3"
    assert get_chip("TRN2").key == "trn2"
    with pytest.raises(UnknownNameError, match="unknown chip 'tpu'"):
        get_chip("tpu")


@pytest.mark.parametrize("key, dtype, tflops", [
    # inferentia.rst; inferentia2.rst / trainium.rst; trainium2.rst; trainium3.rst (chip totals)
    ("inf1", "bf16", 64), ("inf1", "int8", 128),
    ("inf2", "bf16", 190), ("inf2", "fp8", 190), ("inf2", "fp32", 47.5), ("inf2", "int8", 380),
    ("trn1", "bf16", 190), ("trn1", "fp32", 47.5),
    ("trn2", "bf16", 667), ("trn2", "fp8", 1299), ("trn2", "fp32", 181),
    ("trn3", "bf16", 671), ("trn3", "fp8", 2517), ("trn3", "fp32", 183),
])
def test_chip_peaks_equal_the_published_totals(key, dtype, tflops):
    assert get_chip(key).peak_flops(dtype) == pytest.approx(tflops * 1e12, rel=1e-4)


def test_instances_cover_the_issue_list_and_have_one_default_per_chip():
    names = set(all_instances())
    for name in ("inf1.xlarge", "inf1.24xlarge", "inf2.xlarge", "inf2.48xlarge", "trn1.2xlarge",
                 "trn1.32xlarge", "trn1n.32xlarge", "trn2.48xlarge"):
        assert name in names
    assert any("ultraserver" in n and get_instance(n).chip.key == "trn2" for n in names)
    assert any("ultraserver" in n and get_instance(n).chip.key == "trn3" for n in names)
    for chip in all_chips().values():
        assert default_instance(chip).chip is chip
    assert get_instance("inf2.48xlarge").chips == 12
    assert get_instance("trn1.32xlarge").chips == 16
    price = get_instance("inf2.48xlarge").price_usd_per_hour
    assert price is not None and math.isclose(price, 12.98, rel_tol=0.01)
    with pytest.raises(UnknownNameError, match="unknown instance"):
        get_instance("p5.48xlarge")

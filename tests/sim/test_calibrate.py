"""The named residuals as the fit sees them: each keyed by its name and, for a generation's own,
that generation; the values go back to the tables of efficiency.toml they come from."""

from sim.calibrate import RESIDUALS, _overrides, current_values
from sim.hardware.chip import get_chip


def test_a_generations_own_residual_is_its_own_key_and_goes_back_to_its_table():
    values = current_values()
    assert len(values) == len(RESIDUALS)  # no two residuals share a key
    assert values["host_copy_bytes_per_s"] == get_chip("inf2").efficiency.host_copy_bytes_per_s
    assert values["host_copy_bytes_per_s[trn1]"] == get_chip("trn1").efficiency.host_copy_bytes_per_s
    tables = _overrides({**values, "host_copy_bytes_per_s": 1e9, "host_copy_bytes_per_s[trn1]": 2e9})
    assert tables["default"]["host_copy_bytes_per_s"] == 1e9
    assert tables["trn1"] == {"host_copy_bytes_per_s": 2e9}
    assert tables["inf1"] == {"core_dma_bytes_per_s": values["core_dma_bytes_per_s[inf1]"]}
    # Trainium2's own semaphore wait replaces the default one for it alone
    assert values["mm_wait_cycles[trn2]"] == get_chip("trn2").efficiency.mm_wait_cycles
    default = values["mm_wait_cycles"]
    assert get_chip("trn1").efficiency.mm_wait_cycles == get_chip("inf2").efficiency.mm_wait_cycles == default
    # Trainium3, without measurements, is assumed to wait as Trainium2 does (not as NeuronCore-v2)
    assert get_chip("trn3").efficiency.mm_wait_cycles == get_chip("trn2").efficiency.mm_wait_cycles < default
    assert _overrides({**values, "mm_wait_cycles[trn2]": 50.0})["trn2"] == {"mm_wait_cycles": 50.0}

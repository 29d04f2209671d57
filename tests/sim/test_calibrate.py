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

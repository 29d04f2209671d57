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


def test_a_residual_the_rows_do_not_depend_on_keeps_its_value():
    # Inferentia1's encoder Batch rows select the shared host-copy rate but hardly depend on it
    # (their median error moves 0.06 point from 1 to 32 GB/s):
    # the search used to take the bottom of its range (1 GB/s) there, which made the check
    # leaving Inferentia2 out report inf2 with host copies four times slower than any fit gives
    from sim.calibrate import fit_one
    from sim.validate import read_rows

    res = next(r for r in RESIDUALS if r.key == "host_copy_bytes_per_s")
    inf1 = [r for r in read_rows() if r.generation == "inf1" and r.metric == "throughput" and r.config is not None]
    assert len([r for r in inf1 if r.independent and res.select(r)]) >= 3
    values = {**current_values(), res.key: 5e9}
    assert fit_one(res, inf1, values, points=3) == 5e9
    inf2 = [r for r in read_rows() if r.generation == "inf2" and r.metric == "throughput" and r.config is not None]
    assert fit_one(res, inf2, values, points=3) != 5e9  # rows that depend on it move it


def test_leaving_a_generation_out_starts_from_the_middle_of_each_range_and_lends_its_own_residuals():
    from sim.calibrate import held_out_start

    start = held_out_start("inf2")
    copy = next(r for r in RESIDUALS if r.key == "host_copy_bytes_per_s")
    assert start["host_copy_bytes_per_s"] == (copy.low * copy.high) ** 0.5  # 1 and 32 GB/s: 5.66 GB/s
    assert start["launch_overhead_s"] == 2e-4  # half of 0.4 ms
    assert start["host_copy_bytes_per_s"] != current_values()["host_copy_bytes_per_s"]
    # Trainium2 left out: its own semaphore wait is what NeuronCore-v2's was fitted to elsewhere
    ended = held_out_start("trn2", {**start, "mm_wait_cycles": 300.0, "mm_wait_cycles[trn2]": 999.0})
    assert ended["mm_wait_cycles[trn2]"] == 300.0
    # Inferentia1 left out: its DMA rate has no shared counterpart, so the data file's default (no cap)
    ended = held_out_start("inf1", {**start, "core_dma_bytes_per_s[inf1]": 1e10})
    assert ended["core_dma_bytes_per_s[inf1]"] == 0.0


def test_the_fit_section_fits_on_every_row_and_checks_each_generation_left_out(monkeypatch):
    # the T5 pages' per-token rows alone: only the host's generate loop is fitted on them. The
    # measured tokens take 8.2-9.3 ms where the simulated decoder steps take 5.6-6.0 ms (transformers'
    # generate runs in process: no server's request handling), so its fit ends 2.5-3.1 ms a token from
    # the middle of its 0-10 ms range. The other residuals, which
    # these rows cannot inform, start (and stay) at the data file's values here: in the middle of
    # their ranges the decoder's 72 all-reduces a step across four chips would cost 4.8 ms more
    import re

    import sim.accuracy
    import sim.calibrate
    from sim.accuracy import fit_section
    from sim.validate import read_rows

    res = next(r for r in RESIDUALS if r.key == "generate_step_s")
    start = {**current_values(), res.key: sim.calibrate.middle(res)}
    assert start[res.key] == 5e-3
    for module in (sim.accuracy, sim.calibrate):
        monkeypatch.setattr(module, "middle_start", lambda: dict(start))
    rows = [r for r in read_rows() if r.metric == "per_token_ms"]
    assert {r.generation for r in rows} == {"inf2", "trn1"} and len(rows) == 8
    text = "\n".join(fit_section(rows))
    data_file, fitted = re.search(r"^\| `generate_step_s` \| ([\d.e-]+) \| ([\d.e-]+) \|$", text, re.M).groups()
    assert float(data_file) == current_values()["generate_step_s"]
    assert 2.5e-3 <= float(fitted) <= 3.1e-3
    overall = re.search(r"every independent point: ([\d.]+)% with the data file's values, ([\d.]+)% with", text)
    assert float(overall[1]) < 5 and float(overall[2]) < 5
    for gen in ("inf2", "trn1"):  # fitted on the other generation's four rows: within a few percent
        elsewhere, every, file = re.search(rf"^\| {gen} \| ([\d.]+)% \| ([\d.]+)% \| ([\d.]+)% \|", text, re.M).groups()
        assert float(elsewhere) < 5 and float(every) < 5 and float(file) < 5

"""Runs named by what differs, in every pane, table and legend."""

from neuronviz.naming import distinct_titles
from neuronviz.session import Run, Session
from sim.io import save_file
from sim.run import RunConfig, simulate


def _meta(**kw):
    return {"model": "llama-3-8b", "mode": "decode", "cores_per_copy": 32, "copies": 2, "batch": 1, "seq": 128,
            "dtype": "bf16", "config": {"quant": None}, **kw}


def test_runs_of_one_title_are_named_by_the_settings_in_which_they_differ():
    titles = ["Trainium2 · trn2.48xlarge"] * 2 + ["Inferentia2 · inf2.48xlarge"]
    metas = [_meta(), _meta(cores_per_copy=64, copies=1), _meta()]
    assert distinct_titles(titles, metas) == ["Trainium2 · trn2.48xlarge · 32 cores/copy · 2 copies",
                                              "Trainium2 · trn2.48xlarge · 64 cores/copy · 1 copy",
                                              "Inferentia2 · inf2.48xlarge"]  # alone under its title: as it was


def test_a_configured_setting_and_runs_alike_in_everything():
    titles = ["Trainium2 · trn2.48xlarge"] * 3
    metas = [_meta(config={"quant": "fp8"}), _meta(), _meta()]
    assert distinct_titles(titles, metas) == ["Trainium2 · trn2.48xlarge · quant fp8",
                                              "Trainium2 · trn2.48xlarge · quant off #1",
                                              "Trainium2 · trn2.48xlarge · quant off #2"]


def test_the_app_names_two_runs_of_one_instance_by_what_differs_everywhere(demo_window, tmp_path):
    runs = [simulate(RunConfig(model="llama-3-8b", instance="trn2.48xlarge", mode="decode", seq=128, new_tokens=4,
                               cores=c), max_events=20_000) for c in (8, 16)]
    path = tmp_path / "cores.nvtrace"
    save_file(str(path), runs)
    assert demo_window.open_files([str(path)])
    names = ["Trainium2 · trn2.48xlarge · 8 cores/copy · 8 copies",
             "Trainium2 · trn2.48xlarge · 16 cores/copy · 4 copies"]
    assert [p.header.text().split("</b>")[0] for p in demo_window.panes] == [f"<b>{n}" for n in names]
    table = demo_window.summary
    assert [table.item(r, 0).text() for r in range(2)] == names
    demo_window.baseline_menu.aboutToShow.emit()  # filled when it opens
    assert [a.text() for a in demo_window.baseline_menu.actions()] == names
    # a run closed: the other is alone under its title again
    session: Session = demo_window.session
    session.remove_run(0)
    assert [r.title for r in session.runs] == ["Trainium2 · trn2.48xlarge"]
    assert isinstance(session.runs[0], Run) and session.runs[0].short_title == "trn2.48xlarge"

"""The report of a sweep dir over gpus, loader, zero and lora with failed jobs, opened in a real headless browser
(Debian's chromium, installed by .ci/run): the page loads with no script error, every figure has drawn, every job is
labelled by every key the sweeps varied, and the lines against gpus are one per configuration, never two merged;
the screenshot is kept."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import REPO, run_sweep_in

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1400,4000",
    "--enable-logging=stderr",
    "--v=0",
)
ARTIFACTS = REPO / "outputs" / "test-artifacts"  # git-ignored; CI keeps what its run left here
# added to a copy of the page (the user's report has no script): marks every figure drawn (decoded, not blank) and
# counts script errors
PROBE = """
window.rlhfErrors = 0;
window.addEventListener('error', function () { window.rlhfErrors += 1; document.body.dataset.errors = window.rlhfErrors; });
window.addEventListener('load', function () {
  var imgs = document.querySelectorAll('img.plot'), drawn = 0;
  imgs.forEach(function (img) {
    var c = document.createElement('canvas'); c.width = img.naturalWidth; c.height = img.naturalHeight;
    if (!c.width || !c.height) return;
    var ctx = c.getContext('2d'); ctx.drawImage(img, 0, 0);
    var d = ctx.getImageData(0, 0, c.width, c.height).data, ink = 0;
    for (var i = 0; i < d.length; i += 4 * 97) { if (d[i] < 200 || d[i + 1] < 200 || d[i + 2] < 200) ink++; }
    if (ink > 20) { drawn++; img.dataset.drawn = 'yes'; }
  });
  document.body.dataset.figures = imgs.length; document.body.dataset.drawn = drawn;
  document.body.dataset.errors = window.rlhfErrors;
});
"""


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium (.ci/run installs Debian's)")
def test_the_report_of_sweeps_over_four_keys_with_failed_jobs_draws_every_configuration_apart_in_a_browser(
    tmp_path: Path, ckpt_cache: Path
) -> None:
    sweep = tmp_path / "sweep"
    small = ("roles=[actor,ref]", "ppo.steps=0", "wandb.mode=disabled")
    # the users' sweep, then ZeRO-3 without LoRA into the same dir (its jobs fail at ref.load): the dir's jobs differ
    # in gpus, loader, zero, lora and fault.stage, and naive at ZeRO-2 and at ZeRO-3 share every gpus value
    proc, _ = run_sweep_in(sweep, ckpt_cache, "gpus=1,2", "loader=naive,direct", *small)
    assert proc.returncode == 0, proc.stderr[-2000:]
    proc, results = run_sweep_in(sweep, ckpt_cache, "gpus=1,2", "zero=stage3", "lora=disabled", "fault.stage=ref.load", *small)
    assert proc.returncode == 1, proc.stderr[-2000:]  # a job failed
    assert sorted(r["status"] for r in results) == ["completed"] * 4 + ["failed"] * 2  # every job of both sweeps
    report = sweep / "report.html"
    text = report.read_text()
    assert "<script" not in text
    labels = re.findall(r"<h2 id='job\d+'>[^<]*? · ([^<]*?) · (\w+)</h2>", text)
    assert len(labels) == 6 and len({label for label, _ in labels}) == 6, labels
    for label, status in labels:
        assert all(f"{key}=" in label for key in ("gpus", "loader", "zero", "lora", "fault.stage")), label
        assert ("zero=stage3" in label) == (status == "failed") == ("lora=disabled" in label), (label, status)
    for figure in ("node_peak_vs_gpus", "load_time_vs_gpus"):  # one line per configuration: gpus is the x axis
        listed = re.search(rf'<figure id="{figure}">.*?data-series=\'(\d+)\'>(.*?)</ul>', text, re.S)
        assert listed and listed.group(1) == "3", figure
        assert "fault.stage=ref.load loader=naive lora=disabled zero=stage3" in listed.group(2)
        assert "fault.stage=null loader=direct lora=r8 zero=stage2" in listed.group(2)
    page = tmp_path / "report-probed.html"
    page.write_text(text.replace("</head>", f"<script>{PROBE}</script></head>", 1))
    profile = tmp_path / "chromium-profile"
    dom = subprocess.run(
        [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120
    )
    body = re.search(r"<body([^>]*)>", dom.stdout)
    assert body, dom.stderr[-2000:]
    marks = dict(re.findall(r'data-(\w+)="(\d+)"', body.group(1)))
    assert marks["errors"] == "0" and int(marks["figures"]) >= 3 + 6 and marks["drawn"] == marks["figures"], marks
    assert "CONSOLE" not in dom.stderr or "Uncaught" not in dom.stderr
    assert dom.stdout.count("failed at ref.load") == 2  # each failure named on the page
    shot = tmp_path / "report.png"
    subprocess.run(
        [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", f"--screenshot={shot}", page.as_uri()], capture_output=True, timeout=120
    )
    assert shot.stat().st_size > 20_000
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shutil.copy(shot, ARTIFACTS / "report-sweeps-four-keys.png")
    shutil.copy(report, ARTIFACTS / "report-sweeps-four-keys.html")

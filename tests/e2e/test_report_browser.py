"""The report of a sweep with a failed job, opened in a real headless browser (Debian's chromium, installed by
.ci/run): the page loads with no script error and every figure has drawn; the screenshot is kept."""

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
def test_the_report_of_a_sweep_with_a_failed_job_draws_every_figure_in_a_browser(tmp_path: Path, ckpt_cache: Path) -> None:
    sweep = tmp_path / "sweep"
    overrides = ("gpus=1", "roles=[actor,ref]", "ppo.steps=0", "fault.stage=null,ref.load", "wandb.mode=disabled")
    proc, results = run_sweep_in(sweep, ckpt_cache, *overrides)
    assert proc.returncode == 1, proc.stderr[-2000:]  # a job failed
    assert [r["status"] for r in results] == ["completed", "failed"]
    report = sweep / "report.html"
    assert "<script" not in report.read_text()
    page = tmp_path / "report-probed.html"
    page.write_text(report.read_text().replace("</head>", f"<script>{PROBE}</script></head>", 1))
    profile = tmp_path / "chromium-profile"
    dom = subprocess.run(
        [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120
    )
    body = re.search(r"<body([^>]*)>", dom.stdout)
    assert body, dom.stderr[-2000:]
    marks = dict(re.findall(r'data-(\w+)="(\d+)"', body.group(1)))
    assert marks["errors"] == "0" and int(marks["figures"]) >= 3 and marks["drawn"] == marks["figures"], marks
    assert "CONSOLE" not in dom.stderr or "Uncaught" not in dom.stderr
    assert "failed at ref.load" in dom.stdout  # the failure named on the page
    shot = tmp_path / "report.png"
    subprocess.run(
        [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", f"--screenshot={shot}", page.as_uri()], capture_output=True, timeout=120
    )
    assert shot.stat().st_size > 20_000
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shutil.copy(shot, ARTIFACTS / "report-sweep-with-failure.png")
    shutil.copy(report, ARTIFACTS / "report-sweep-with-failure.html")

"""`hydra/launcher=rlhf_slurm`: hydra-submitit-launcher's SLURM launcher with resources per job.

The stock launcher resolves resources once per multirun, so in `-m gpus=1,8` both jobs would get
the same tasks and GPUs. This one submits each job on its own, sized from that job's `gpus`:
nodes > 1 when gpus exceeds `gpus_per_node_max`, one SLURM task per node (that node's job process,
the same driver as a local run: rlhf_exp/job/driver.py, which starts the node's ranks, watcher and
guard), gpus_per_node when GPUs are requested. A job whose dir holds a completed result of the same
config is not submitted (`resume`). srun runs with --kill-on-bad-exit, so one dead node task ends the
step at once; when a step dies without a result (killed from outside), the launcher writes that job's
failed result.json from what its ranks recorded, and the sweep goes on.
"""

# No `from __future__ import annotations`: Hydra loads plugins outside sys.modules, where string
# annotations break @dataclass, and OmegaConf needs real typing objects.
import logging
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional  # noqa: UP035 - OmegaConf structured-config types

from hydra.core.config_store import ConfigStore
from hydra.core.hydra_config import HydraConfig
from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, JobStatus, filter_overrides
from hydra_plugins.hydra_submitit_launcher.config import BaseQueueConf, SlurmQueueConf
from hydra_plugins.hydra_submitit_launcher.submitit_launcher import SlurmLauncher
from omegaconf import DictConfig, OmegaConf, open_dict

from hydra_plugins.rlhf_exp_launcher.cluster import first_refusal, partitions
from hydra_plugins.rlhf_exp_launcher.progress import watch_jobs

log = logging.getLogger(__name__)
OWN_KEYS = {"gpus_per_node_max", "request_gpus", "srun_args", "cpus_per_rank"}


@dataclass
class RlhfSlurmConf(SlurmQueueConf):
    _target_: str = "hydra_plugins.rlhf_exp_launcher.rlhf_slurm.RlhfSlurmLauncher"
    # GPUs (= ranks) one node holds; a job with more gpus spans ceil(gpus / this) nodes
    gpus_per_node_max: int = 8
    # ask SLURM for one GPU per rank: auto = unless the job's device is cpu
    request_gpus: str = "auto"
    # extra srun arguments; --kill-on-bad-exit=1 is always added so a dead node task ends the step
    srun_args: List[str] = field(default_factory=list)  # noqa: UP006
    timeout_min: int = 60
    # host memory per node; null (unless mem_per_cpu/mem_per_gpu is set): each job's plan asks for what it will use
    mem_gb: Optional[int] = None  # noqa: UP045
    # CPU cores per rank; a node's task gets cpus_per_rank x its ranks (unless cpus_per_task is set)
    cpus_per_rank: int = 1
    cpus_per_task: Optional[int] = None  # noqa: UP045
    # a sbatch line per entry: e.g. ["source ~/venv/bin/activate", "module load cuda"]
    setup: Optional[List[str]] = None  # noqa: UP006, UP045


ConfigStore.instance().store(group="hydra/launcher", name="rlhf_slurm", node=RlhfSlurmConf, provider="rlhf_exp")


def job_resources(gpus: int, per_node_max: int, request_gpus: bool, cpus_per_rank: int) -> Dict[str, Any]:  # noqa: UP006
    """nodes, one task per node (the node's job process), its CPUs, and gpus_per_node for one job's gpus."""
    nodes = math.ceil(gpus / per_node_max)
    if gpus % nodes:
        raise ValueError(f"gpus: {gpus} does not split evenly over {nodes} nodes of at most {per_node_max}")
    per_node = gpus // nodes
    return {
        "nodes": nodes,
        "tasks_per_node": 1,
        "cpus_per_task": per_node * cpus_per_rank,
        "gpus_per_node": per_node if request_gpus else None,
    }


def job_return(overrides: List[str], config: DictConfig, job_dir: Path, status: str) -> JobReturn:  # noqa: UP006
    """Hydra's record of a job the launcher settled itself (skipped, never run, or died without its own return):
    the job's status (result.json's) as its return value; Hydra's status COMPLETED, so the sweep goes on."""
    ret = JobReturn(overrides=overrides, cfg=config, working_dir=str(job_dir), status=JobStatus.COMPLETED)
    ret.return_value = status
    return ret


class RlhfSlurmLauncher(SlurmLauncher):
    def _job_config(self, overrides: List[str], idx: int) -> DictConfig:  # noqa: UP006
        config = self.hydra_context.config_loader.load_sweep_config(self.config, overrides)
        with open_dict(config.hydra.job):
            config.hydra.job.num = idx
        return config

    def _job_dir(self, config: DictConfig) -> Path:
        HydraConfig.instance().set_config(config)  # resolves ${hydra:...} in the sweep subdir
        return Path(str(config.hydra.sweep.dir)) / str(config.hydra.sweep.subdir)

    def _check(self, config: DictConfig) -> Any:
        """The job's config without Hydra's node, validated before anything is submitted (a bad value: one
        line, exit 2); returns (settings, the resolved config as the job will record it)."""
        from rlhf_exp.config.errors import ConfigError
        from rlhf_exp.config.schema import settings_of, to_plain

        plain = OmegaConf.create(OmegaConf.to_container(config, resolve=False))
        with open_dict(plain):
            plain.pop("hydra", None)
        try:
            resolved = to_plain(plain)  # once, as the job process does (cli/hydra_app.py)
            return settings_of(resolved), resolved
        except ConfigError as err:
            print(f"error: {err}", file=sys.stderr)
            sys.exit(2)

    @staticmethod
    def _planned_mem_mib(settings: Any, config: DictConfig, want_gpus: bool, resources: Dict[str, Any]) -> int:  # noqa: UP006
        """The job's node memory from its plan (rlhf_exp/plan/admission.py); a plan that cannot be made: one line, exit 2."""
        from rlhf_exp.config.errors import ConfigError
        from rlhf_exp.plan.admission import node_memory_request_mib

        device = "cuda" if want_gpus and str(config.device) != "cpu" else "cpu"
        try:
            return node_memory_request_mib(settings, device, resources["nodes"], settings.gpus // resources["nodes"])
        except ConfigError as err:
            print(f"error: {err}", file=sys.stderr)
            sys.exit(2)

    def launch(self, job_overrides: Any, initial_job_idx: int) -> List[JobReturn]:  # noqa: UP006
        import submitit

        executor = submitit.AutoExecutor(cluster="slurm", folder=self.params["submitit_folder"])
        base_keys = set(OmegaConf.structured(BaseQueueConf).keys())
        common = {
            (k if k in base_keys else f"slurm_{k}"): v
            for k, v in self.params.items()
            if k not in OWN_KEYS | {"submitit_folder", "max_num_timeout", "setup"}
        }
        from rlhf_exp.job.placement import SLURM_NODE_TASK_MARKER
        from rlhf_exp.job.result import completed_result
        from rlhf_exp.jobdir import JobDir

        setup = [*(self.params.get("setup") or []), f"export {SLURM_NODE_TASK_MARKER}=1"]
        srun_args = ["--kill-on-bad-exit=1", *self.params.get("srun_args", [])]
        planned: List[Any] = []  # noqa: UP006 - (overrides, config, job dir, sbatch parameters or None: skipped, name)
        for idx, overrides in enumerate(job_overrides, start=initial_job_idx):
            config = self._job_config(list(overrides), idx)
            settings, plain = self._check(config)
            job_dir = self._job_dir(config)
            if settings.resume and completed_result(JobDir(job_dir), plain):
                log.info(f"\t#{idx} : skipped: {job_dir} holds a completed result of this config (resume=false runs it again)")
                planned.append((list(overrides), config, job_dir, None, ""))
                continue
            request = self.params["request_gpus"]
            want_gpus = str(config.device) != "cpu" if request == "auto" else str(request).lower() == "true"
            resources = job_resources(
                settings.gpus, int(self.params["gpus_per_node_max"]), want_gpus, int(self.params["cpus_per_rank"])
            )
            if self.params.get("cpus_per_task"):
                resources["cpus_per_task"] = int(self.params["cpus_per_task"])
            if not any(self.params.get(k) for k in ("mem_gb", "mem_per_cpu", "mem_per_gpu")):
                resources["slurm_mem"] = f"{self._planned_mem_mib(settings, config, want_gpus, resources)}M"
            elif self.params.get("mem_gb"):
                resources["mem_gb"] = int(self.params["mem_gb"])
            params = {**common, **resources, "slurm_setup": setup, "slurm_srun_args": srun_args, "name": f"rlhf_exp_{idx}"}
            planned.append((list(overrides), config, job_dir, params, f"job #{idx} (gpus={settings.gpus})"))
        # every job checked against the cluster before the first is submitted
        jobs = [(name, params) for _, _, _, params, name in planned if params]
        refusal = first_refusal(partitions(), self.params.get("partition"), jobs)
        if refusal:
            print(f"error: {refusal}", file=sys.stderr)
            sys.exit(2)
        submitted: List[Any] = []  # noqa: UP006
        for idx, (overrides, config, job_dir, params, _) in enumerate(planned, start=initial_job_idx):
            if params is None:
                submitted.append((None, overrides, config, job_dir))
                continue
            executor.update_parameters(**params)
            try:
                job = executor.submit(self, overrides, "hydra.sweep.dir", idx, f"job_id_for_{idx}", Singleton.get_state())
            except Exception as err:  # sbatch refused it after others were submitted: none is left running alone
                return self._abandon(submitted, planned, idx, err)
            log.info(f"\t#{idx} : {' '.join(filter_overrides(overrides))} -> SLURM job {job.job_id}")
            submitted.append((job, overrides, config, job_dir))
        try:
            watch_jobs([(job, job_dir) for job, _, _, job_dir in submitted if job is not None])
            return [self._collect(*entry) for entry in submitted]
        except KeyboardInterrupt:  # Ctrl-C or SIGTERM to the sweep: stop it, its SLURM jobs included
            for job, *_ in submitted:
                if job is not None and not job.done():
                    job.cancel(check=False)  # SLURM's SIGTERM: each running job records itself as interrupted
            log.warning("sweep interrupted: its SLURM jobs were cancelled")
            raise SystemExit(130) from None

    def _abandon(self, submitted: List[Any], planned: List[Any], failed_idx: int, err: Exception) -> List[JobReturn]:  # noqa: UP006
        """sbatch refused job `failed_idx` after the ones in `submitted`: cancel those, record every job of the sweep
        not already complete as failed (result.json), and return them so that the sweep's table is printed."""
        from rlhf_exp.job.result import record_not_run
        from rlhf_exp.jobdir import JobDir

        reason = f"sbatch refused job #{failed_idx}: {str(err).strip().splitlines()[-1][:300]}"
        print(f"error: {reason}; the sweep's submitted jobs were cancelled", file=sys.stderr)
        for job, *_ in submitted:
            if job is not None:
                job.cancel(check=False)
        for _, _, job_dir, params, name in planned:
            if params is not None:
                record_not_run(JobDir(job_dir), "submit", f"{reason} ({name} not run)")
        return [job_return(o, c, d, "completed" if p is None else "failed") for o, c, d, p, _ in planned]

    def _collect(self, job: Any, overrides: List[str], config: DictConfig, job_dir: Path) -> JobReturn:  # noqa: UP006
        """Node 0's JobReturn; a SLURM job that died without a result gets its failed result.json written here."""
        if job is None:  # skipped: already complete
            return job_return(overrides, config, job_dir, "completed")
        try:
            return job.results()[0]
        except Exception as exc:  # the step died: a node task was killed, interrupted, or raised
            from rlhf_exp.job.result import record_dead_job
            from rlhf_exp.jobdir import JobDir

            own = JobDir(job_dir).read_result()
            if own and own.get("run_id") == f"slurm-{job.job_id}":  # the job recorded itself (interrupted, say)
                return job_return(overrides, config, job_dir, own["status"])
            result = record_dead_job(JobDir(job_dir), f"SLURM job {job.job_id} {job.state}: {str(exc).splitlines()[0][:300]}")
            log.warning(f"SLURM job {job.job_id} failed at stage {result['failure']['stage'] if result else '?'}")
            return job_return(overrides, config, job_dir, "failed")

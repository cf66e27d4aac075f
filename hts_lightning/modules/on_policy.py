"""The one on-policy training skeleton: batch -> advantages -> update -> weights back out.

Algorithms subclass :class:`OnPolicyModule`, hand it their TorchRL loss with :meth:`use_loss`
at the end of their ``__init__`` (where their own arguments are known) and override
:meth:`update`. The collector is a :class:`~hts_lightning.modules.collection.CollectionBinding`,
the delayed gradient's weights :class:`~hts_lightning.modules.behaviour.BehaviourParameters`,
statistics over ranks :mod:`~hts_lightning.ranks`; advantages, the skeleton, metrics
and checkpoints live here once.
"""

from __future__ import annotations

import math
import os
import statistics
import time
from collections import deque
from contextlib import nullcontext

import torch
from lightning import Callback, LightningModule
from tensordict import TensorDictBase
from torchrl.objectives import LossModule, ValueEstimators

from hts_lightning import choices
from hts_lightning.choices import (
    CollectorKind,
    EnvBackend,
    GradientMode,
    InferenceMode,
    LrSchedule,
    OnEnvError,
    OptimizerName,
)
from hts_lightning.collectors.factory import check_collector_options
from hts_lightning.envs import env_factory
from hts_lightning.envs.factory import with_clipped_actions
from hts_lightning.models import NatureCNN, RunningNorm, build_network, make_actor_critic
from hts_lightning.models.action_heads import ContinuousDistribution
from hts_lightning.modules.advantages import OneCallGAE
from hts_lightning.modules.behaviour import BehaviourParameters
from hts_lightning.modules.callback_metrics import PROGRESS_BAR, read_by_callbacks
from hts_lightning.modules.collection import CollectionBinding
from hts_lightning.modules.lightning_steps import LightningSteps
from hts_lightning.modules.normalization import RewardScaler
from hts_lightning.ranks import episode_end_values, mean_over_ranks, standardized


def explained_variance(value: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """1 - Var(target - value) / Var(target): 1 is a perfect critic, 0 a constant one."""
    variance = target.var()
    return 1.0 - (target - value).var() / variance if variance > 0 else torch.zeros(())


def num_updates(total_frames: int | None, frames_per_batch: int) -> int | None:
    """Updates in a run bounded by ``total_frames`` (one per batch); ``None`` when unbounded."""
    return None if total_frames is None else -(-total_frames // frames_per_batch)


class OnPolicyModule(LightningModule):
    """Shared skeleton of A2C, PPO and ACKTR; the collector is the Trainer's data source.

    Each training step receives one batch ``[num_envs, sync_interval]``, computes advantages
    with TorchRL's GAE, lets the algorithm :meth:`update` the parameters, and sends the new
    weights to the collector. With the HTSCollector the next batch is collected meanwhile,
    with the weights of the previous update: the policy lag is exactly one.

    ``gradient_mode`` names where the gradient is taken:

    - ``"delayed"``: at the behaviour parameters theta_{k-1} that collected batch k (kept as a
      snapshot per sent version), applied to the current parameters theta_k. Advantages use the
      behaviour critic. This is HTS-RL's one-step delayed gradient.
    - ``"current"``: at the current parameters theta_k. PPO's loss corrects for the lag with
      the clipped importance ratio against the stored behaviour log-probabilities; A2C's loss
      has no such correction (an ablation: the plain policy gradient at stale data).

    - ``"decoupled"`` (PPO only): at the current parameters, PPO's clipped ratio taken against
      the policy at the start of the update (theta_k, the proximal policy) and the lag
      corrected by the importance weight pi_k / pi_{k-1} (Hilton et al. 2022, "Batch
      size-invariance for policy optimization": decoupled PPO).

    With ``"delayed"`` PPO evaluates every epoch at theta_{k-1}, where the ratio is 1: its
    clipping never engages, and its epochs are plain gradient steps at one point.

    Every update's metrics (``rollout/``, ``perf/``, ``time/``, ``train/``...) go to the
    loggers with the env-frame count as step, and stay in :attr:`last_metrics` for
    callbacks. Lightning's callback metrics hold those the callbacks read (any metric a
    checkpoint or early-stopping callback monitors; ``perf/frames``, ``perf/fps`` and
    ``rollout/return_last_20`` when a progress bar shows them), see
    ``read_by_callbacks``.

    Keyword Args:
        env_id: gymnasium / ALE id, ``"VariableLatency"``, or your own env: the import path
            ``"package.module:make_env"`` of a callable returning a TorchRL env or a gymnasium
            env (see :func:`~hts_lightning.envs.env_factory`).
        env_kwargs: extra arguments of the env factory.
        num_envs, num_workers, sync_interval: the collector's.
        seed: the run's seed (network initialization, every replica's env and action noise,
            minibatch order). ``None`` (default): Lightning's global seed, the one
            ``seed_everything`` (a recipe's ``seed_everything:``) set, or 0 when none was set,
            as Lightning itself does. An explicit value wins. The seed in force is saved in
            ``hparams.seed`` (so in MLflow's params and tags and in checkpoints).
        total_frames: env frames to train on (``None``: until the Trainer stops).
        collector: ``"hts"`` or a TorchRL baseline (``"sync"``, ``"multi_sync"``,
            ``"multi_async"``), see :func:`hts_lightning.collectors.make_collector`.
        hidden_sizes: MLP sizes for vector observations (pixels get the Nature CNN).
        shared_trunk: one MLP trunk for actor and critic, or two MLPs (vectors only).
        orthogonal_init: the anchors' initialization (orthogonal, policy output gain 0.01),
            see :func:`~hts_lightning.models.make_actor_critic`; else torch's default.
        continuous: box actions' distribution: ``"normal"`` (a diagonal Gaussian with a
            state-independent scale; the env clips the sample to its bounds, the
            log-probability is the sample's) or ``"tanh_normal"`` (squashed into the bounds).
        network, network_kwargs: your own actor-critic instead of ``make_actor_critic``: the
            import path ``"package.module:build"`` of a callable taking ``(observation_spec,
            action_spec, **network_kwargs)`` and returning a TorchRL ``ActorValueOperator``
            (see :func:`~hts_lightning.models.build_network`). ``hidden_sizes``,
            ``shared_trunk``, ``orthogonal_init`` and ``continuous`` are then unused.
        normalize_observations: a running standardization of vector observations as the
            network's first layer (:class:`~hts_lightning.models.RunningNorm`; updated after
            each update, kept in checkpoints and in the logged model).
        normalize_reward: rewards divided by the running std of the discounted return
            before the advantages (:class:`~hts_lightning.modules.normalization.RewardScaler`;
            the logged returns stay raw).
        optimizer: ``"adam"`` (eps 1e-5), ``"rmsprop"`` (PyTorch's, alpha 0.99, eps 1e-5:
            Stable-Baselines3's A2C default, which RL Zoo's MuJoCo A2C keeps) or
            ``"rmsprop_tf"`` (the same settings as TensorFlow's RMSprop computes them, which
            OpenAI baselines' and RL Zoo's Atari A2C train with: Stable-Baselines3's
            ``RMSpropTFLike``; its running square starts at 1, so the first steps are small
            where PyTorch's are ~10x the learning rate).
        lr, lr_schedule: the optimizer's learning rate, ``"constant"`` or ``"linear"`` decay
            to 0 over ``total_frames``.
        gamma, gae_lambda: GAE.
        entropy_coef, value_coef, max_grad_norm: loss weights and gradient clipping.
        normalize_advantage: standardize advantages per batch.
        gradient_mode: see above.
        inference_device: where the collector runs the policy (default: CPU).
        inference: the HTSCollector's ``inference`` (``"auto"``, ``"workers"``, ``"main"``).
        on_env_error: the HTSCollector's: ``"raise"`` (default) stops training at an env
            error; ``"restart"`` re-creates the failed replica and goes on (logged, counted in
            ``collector/env_restarts``; that replica's trajectory is no longer reproducible).
        env_backend: ``"python"`` (TorchRL envs in worker processes) or ``"envpool"`` (the
            HTSCollector's native backend: envpool's C++ threads step the replicas; Linux x86-64).
        batch_timeout: seconds the module waits for a batch from its collector (any kind)
            before it stops with :class:`~hts_lightning.collectors.BatchTimeoutError`, naming
            the collector (``None``: no bound). The default, 10 minutes, is far above a batch
            of the recipes here; raise it for envs slower than that.
        learner_threads: torch threads of the learner's process once collection starts
            (``None``: a convolutional network (pixel observations) takes every core, since
            its update is the critical path; otherwise the collector's rule, which for the
            HTSCollector leaves one core to collection. Neither follows ``num_workers``, so
            runs stay bitwise equal across worker counts. Under DDP, ranks on one machine
            split its cores and each learner takes its share, less one unless
            convolutional). A CPU learner's results depend on its thread count: keep it fixed
            across runs that are compared bitwise, on machines of other core counts too.
        worker_niceness: the HTSCollector's: added to its worker processes' niceness (0-19);
            above 0 the learner comes first and takes every core (see ``learner_threads``).
        overlap: the HTSCollector's: ``False`` collects each batch after the previous update
            (no lag, no overlap: synchronous A2C/PPO on the same engine, envs and seeds), to
            measure what the overlap costs or gains.
    """

    default_gradient_mode: GradientMode = "delayed"
    #: The gradient modes the algorithm offers.
    gradient_modes: tuple[GradientMode, ...] = ("delayed", "current")

    def __init__(
        self,
        *,
        env_id: str = "CartPole-v1",
        env_kwargs: dict | None = None,
        num_envs: int = 16,
        num_workers: int = 2,
        sync_interval: int = 128,
        total_frames: int | None = None,
        seed: int | None = None,
        collector: CollectorKind = "hts",
        hidden_sizes: tuple[int, ...] = (64, 64),
        shared_trunk: bool = True,
        orthogonal_init: bool = False,
        continuous: ContinuousDistribution = "normal",
        network: str | None = None,
        network_kwargs: dict | None = None,
        normalize_observations: bool = False,
        normalize_reward: bool = False,
        optimizer: OptimizerName = "adam",
        lr: float = 3e-4,
        lr_schedule: LrSchedule = "constant",
        gamma: float = 0.99,
        gae_lambda: float = 0.95,
        entropy_coef: float = 0.01,
        value_coef: float = 0.5,
        max_grad_norm: float | None = 0.5,
        normalize_advantage: bool = False,
        gradient_mode: GradientMode | None = None,
        inference_device: str | None = None,
        inference: InferenceMode = "auto",
        on_env_error: OnEnvError = "raise",
        env_backend: EnvBackend = "python",
        batch_timeout: float | None = 600.0,
        learner_threads: int | None = None,
        worker_niceness: int = 0,
        overlap: bool = True,
    ):
        super().__init__()
        self.gradient_mode = choices.check_gradient_mode(
            gradient_mode or self.default_gradient_mode
        )
        if self.gradient_mode not in self.gradient_modes:
            raise ValueError(
                f"gradient_mode={self.gradient_mode!r} is not offered by "
                f"{type(self).__name__}; choose one of {self.gradient_modes}."
            )
        choices.check_inference_mode(inference)
        choices.check_on_env_error(on_env_error)
        choices.check_lr_schedule(lr_schedule)
        choices.check_optimizer(optimizer)
        if not (collector == "hts" and env_backend == "envpool"):
            # envpool's threads take any env whenever free: no blocks of replicas to divide.
            choices.check_replicas_per_worker(num_envs, num_workers)
        check_collector_options(
            collector, on_env_error=on_env_error, worker_niceness=worker_niceness, overlap=overlap
        )
        if lr_schedule == "linear" and total_frames is None:
            raise ValueError("lr_schedule='linear' decays over total_frames: set total_frames.")
        self.save_hyperparameters()
        # The seed in force replaces None in the saved (and logged) hyperparameters: else
        # Lightning's global seed (seed_everything keeps it in the PL_GLOBAL_SEED environment
        # variable, which DDP ranks inherit), else 0.
        if seed is None:
            seed = int(os.environ.get("PL_GLOBAL_SEED", 0))
        self.save_hyperparameters({"seed": seed})
        self.create_env = env_factory(env_id, backend=env_backend, **(env_kwargs or {}))
        probe = self.create_env()
        # A Gaussian's samples reach the env clipped to its bounds (a float Bounded spec).
        self.create_env = with_clipped_actions(self.create_env, probe.action_spec)
        torch.manual_seed(seed)
        if network is None:
            self.model = make_actor_critic(
                probe.observation_spec,
                probe.action_spec,
                hidden_sizes=tuple(hidden_sizes),
                shared_trunk=shared_trunk,
                orthogonal_init=orthogonal_init,
                continuous=continuous,
                normalize_observations=normalize_observations,
            )
        else:
            self.model = build_network(
                network, probe.observation_spec, probe.action_spec, **(network_kwargs or {})
            )
        probe.close()
        self.actor = self.model.get_policy_operator()
        self.critic = self.model.get_value_operator()
        # The loss runs the actor (trunk and head) and then only the critic's head on the
        # trunk's "features" (TorchRL's advice for shared trunks: one trunk pass, not two).
        # GAE, run on observations and next observations alike (one call over both, see
        # OneCallGAE), needs the whole critic.
        self.critic_head = self.model.get_value_head()
        self.collection = CollectionBinding(
            kind=collector,
            create_env=self.create_env,
            policy=self.actor,
            num_envs=num_envs,
            num_workers=num_workers,
            sync_interval=sync_interval,
            seed=seed,
            device=inference_device,
            inference=inference,
            on_env_error=on_env_error,
            batch_timeout=batch_timeout,
            learner_threads=learner_threads,
            # Pong and football PPO trained 1.34x and 1.4-1.55x faster end to end with every
            # core on an idle 2-core machine (benchmarks/RESULTS.md); an MLP's small ops beside
            # busy workers ran ~10x slower that way.
            learner_takes_every_core=any(isinstance(m, NatureCNN) for m in self.model.modules()),
            worker_niceness=worker_niceness,
            overlap=overlap,
        )
        self.automatic_optimization = False
        #: Scales the rewards before the advantages (``normalize_reward``); its state is
        #: checkpointed with the module.
        self.reward_scaler = (
            RewardScaler(num_envs=num_envs, gamma=gamma) if normalize_reward else None
        )
        #: The network's observation statistics (normalize_observations), updated per batch.
        self._observation_norms = [m for m in self.model.modules() if isinstance(m, RunningNorm)]
        self.frames_per_batch = num_envs * sync_interval
        self.updates = 0
        self.frames = 0
        self.recent_returns: deque[float] = deque(maxlen=20)
        #: Every metric of the last update, as the loggers got it (``train/`` included).
        self.last_metrics: dict[str, float] = {}
        #: The policy version whose parameters this update's gradient is taken at.
        self.gradient_version = 0
        self.loss_module: LossModule | None = None
        self._steps: LightningSteps | None = None
        self._advantages: OneCallGAE | None = None
        self._parameter_list: list[torch.nn.Parameter] = []
        self._read_by_callbacks: frozenset[str] = frozenset()

    # --- for the algorithms ----------------------------------------------------------------

    def use_loss(self, loss: LossModule) -> None:
        """Train with ``loss`` (a TorchRL loss over ``actor`` and ``critic_head``; it
        runs the actor first, so the head reads the trunk's ``"features"``), its advantages
        from GAE with the module's ``gamma`` and ``gae_lambda``. Algorithms call it at the end
        of their ``__init__``."""
        self.loss_module = loss
        loss.make_value_estimator(
            ValueEstimators.GAE,
            gamma=self.hparams.gamma,
            lmbda=self.hparams.gae_lambda,
            value_network=self.critic,
        )
        # The gradient step's loss call: a dict of terms where the loss offers one (no output
        # TensorDict; see LeanClipPPOLoss.lean_loss), else the TorchRL loss's TensorDict.
        self._loss_call = getattr(loss, "lean_loss", loss.__call__)
        # The training step's advantages: the same estimator, the critic called once.
        self._advantages = OneCallGAE(loss.value_estimator)
        self.behaviour = BehaviourParameters(loss)
        self.behaviour.remember(self.updates)

    def update(self, batch: TensorDictBase) -> dict[str, torch.Tensor]:
        """Change the parameters using ``batch`` (advantages already in it), by calls to
        :meth:`gradient_step`. Returns detached diagnostics to log under ``train/``."""
        raise NotImplementedError

    def gradient_parameters(self):
        """A context in which the parameters are those this update's gradient is taken at
        (:attr:`gradient_version`'s: the behaviour parameters for ``"delayed"``, the current
        ones for ``"current"``); the current ones come back on exit, gradients stay on them."""
        if self.gradient_version == self.updates:
            return nullcontext()  # ~10 us a step less than the snapshot's generator context
        return self.behaviour.at(self.gradient_version, current=self.updates)

    def gradient_step(self, data: TensorDictBase) -> dict[str, torch.Tensor]:
        """One optimizer step on ``data``: the loss and its gradient are taken at the parameters
        of ``gradient_mode`` (behaviour or current), the step is applied to the current
        parameters. Returns the detached loss terms and the gradient norm."""
        optimizer = self.optimizers()
        steps = self._steps
        steps.zero_grad(optimizer)
        with self.gradient_parameters():
            losses = self._loss_call(data)
            terms = [v for k, v in losses.items() if k.startswith("loss_")]
            total = sum(terms[1:], terms[0])  # sum(terms) would add a 0 + first op and node
            steps.backward(total)
        max_norm = self.hparams.max_grad_norm or float("inf")
        norm = torch.nn.utils.clip_grad_norm_(self._parameter_list, max_norm)
        if not (math.isfinite(total.item()) and math.isfinite(norm.item())):
            terms = ", ".join(
                f"{k}={float(v):.4g}" for k, v in losses.items() if k.startswith("loss_")
            )
            raise FloatingPointError(
                f"Non-finite loss or gradient at update {self.updates} ({terms}, gradient norm "
                f"{float(norm):.4g}); training stopped before the step, so the parameters and "
                "the checkpoints stay finite. Look for NaN/inf in observations or rewards, or "
                "lower the learning rate."
            )
        steps.step(optimizer)
        out = {k: v.detach() for k, v in losses.items()}
        out["grad_norm"] = norm.detach()
        return out

    def make_optimizer(self) -> torch.optim.Optimizer:
        """The optimizer of the loss parameters (``optimizer``); ACKTR overrides it with
        K-FAC."""
        parameters, lr = self.loss_module.parameters(), self.hparams.lr
        if self.hparams.optimizer == "rmsprop":
            return torch.optim.RMSprop(parameters, lr=lr, alpha=0.99, eps=1e-5)
        if self.hparams.optimizer == "rmsprop_tf":
            from stable_baselines3.common.sb2_compat.rmsprop_tf_like import RMSpropTFLike

            return RMSpropTFLike(parameters, lr=lr, alpha=0.99, eps=1e-5)
        # Fused: one kernel for all parameters (a 4.7k-parameter MLP's step: 0.47 -> 0.14 ms).
        return torch.optim.Adam(parameters, lr=lr, eps=1e-5, fused=True)

    #: Optimizer steps per batch (one update); PPO overrides it.
    optimizer_steps_per_update: int = 1

    # --- the skeleton ----------------------------------------------------------------------

    def collection_frames(self) -> int:
        """Frames to collect: ``total_frames``, else enough batches for ``trainer.max_steps``.

        The collector handed to Lightning must have a length: for an iterable without one,
        Lightning fetches a batch ahead of the training step, so the weights of update k would
        reach the collector after batch k+1 is handed out, and the policy lag would become 2.
        """
        if self.hparams.total_frames is not None:
            return self.hparams.total_frames
        max_steps = self.trainer.max_steps if self._trainer is not None else -1
        if max_steps is None or max_steps < 0:
            raise ValueError(
                "Bound the run: set model total_frames (env frames) or trainer max_steps "
                "(optimizer steps). An unbounded collector would let Lightning fetch a batch "
                "ahead and the policy lag would become 2."
            )
        updates = -(-max_steps // self.optimizer_steps_per_update)
        return updates * self.frames_per_batch

    def setup(self, stage: str) -> None:
        if self.loss_module is None:
            raise TypeError(
                f"{type(self).__name__} has no loss: call self.use_loss(...) at the end of "
                "its __init__."
            )
        # Before the run is logged or wrapped for DDP: refuse a remainder of replicas.
        self.collection.check_ranks(self.trainer.world_size)

    def train_dataloader(self):
        # A new collector counts policy versions from 0 with the weights it is given now (the
        # trained ones on a second fit), or from its restored state on resume.
        self.behaviour.remember(self.updates)
        return self.collection.start(
            batches=num_updates(self.collection_frames(), self.frames_per_batch),
            updates=self.updates,
            world_size=self.trainer.world_size,
            rank=self.global_rank,
            ranks_here=self.trainer.num_devices if self.trainer.world_size > 1 else 1,
        )

    def configure_optimizers(self):
        optimizer = self.make_optimizer()
        total = num_updates(self.hparams.total_frames, self.frames_per_batch)
        if self.hparams.lr_schedule == "linear":
            scheduler = torch.optim.lr_scheduler.LambdaLR(
                optimizer, lambda update: max(1.0 - update / total, 0.0)
            )
            return [optimizer], [scheduler]
        return optimizer

    def on_train_start(self) -> None:
        # Decided once per fit: the callbacks, strategy and precision do not change within it.
        self._steps = LightningSteps(self.trainer, self)
        # The loss's parameters, in its order (the gradient norm's), listed once per fit.
        self._parameter_list = list(self.loss_module.parameters())
        self._read_by_callbacks = read_by_callbacks(self.trainer)
        self._started = time.perf_counter()
        self._last_step_end = self._started

    def training_step(self, batch: TensorDictBase, batch_idx: int) -> None:
        waited = time.perf_counter() - self._last_step_end
        start = time.perf_counter()
        batch = batch.reshape(-1, batch.shape[-1]).to(self.device)
        behaviour_version = self.collection.behaviour_version(batch, updates=self.updates)
        delayed = self.gradient_mode == "delayed" and behaviour_version is not None
        self.gradient_version = behaviour_version if delayed else self.updates
        if self.reward_scaler is not None:
            batch["next", "reward"] = self.reward_scaler(
                batch, reduce=self._sum_over_ranks(), rank=self.global_rank
            )
        with torch.no_grad(), self.gradient_parameters():
            self._advantages(batch)
        if self.hparams.normalize_advantage:
            batch["advantage"] = standardized(self, batch["advantage"])
        diagnostics = self.update(batch)
        diagnostics["explained_variance"] = explained_variance(
            batch["state_value"], batch["value_target"]
        )
        scheduler = self.lr_schedulers()
        if scheduler is not None:
            scheduler.step()
        # After the update: the next batch is collected, and then learned from, with these.
        for norm in self._observation_norms:
            norm.update(batch["observation"], reduce=self._sum_over_ranks())
        self.updates += 1
        self.behaviour.remember(self.updates)
        self.collection.send_weights()
        self._log_step(batch, diagnostics, behaviour_version, waited, start)
        self._last_step_end = time.perf_counter()

    def _sum_over_ranks(self):
        """A sum over the ranks of a tensor (``None`` on one rank), for shared statistics."""
        if self.trainer.world_size == 1:
            return None
        return lambda tensor: self.trainer.strategy.reduce(tensor, reduce_op="sum")

    def _log_step(self, batch, diagnostics, behaviour_version, waited, start) -> None:
        # Every rank sees the same numbers: frames, episodes and losses of all shards.
        world = self.trainer.world_size
        self.frames += batch.numel() * world
        names = sorted(diagnostics)
        means = mean_over_ranks(self, torch.stack([diagnostics[k].float().mean() for k in names]))
        metrics = {f"train/{k}": v for k, v in zip(names, means, strict=True)}
        returns = episode_end_values(self, batch, "episode_reward")
        if returns is not None and returns.numel():
            self.recent_returns.extend(returns.tolist())
            metrics["rollout/episode_return"] = returns.mean()
            lengths = episode_end_values(self, batch, "step_count")
            if lengths is not None:
                metrics["rollout/episode_length"] = lengths.mean()
        if self.recent_returns:
            metrics["rollout/return_last_20"] = statistics.fmean(self.recent_returns)
        elapsed = time.perf_counter() - self._started
        metrics["perf/fps"] = self.frames / max(elapsed, 1e-9)
        metrics["perf/frames"] = float(self.frames)
        if behaviour_version is not None:
            # Updates done before this batch's step, minus the version that collected it.
            metrics["perf/policy_lag"] = float(self.updates - 1 - behaviour_version)
        if self.hparams.on_env_error == "restart":
            restarts = torch.tensor(float(self.collection.env_restarts))
            if world > 1:
                restarts = self.trainer.strategy.reduce(restarts, reduce_op="sum")
            metrics["collector/env_restarts"] = restarts
        metrics["time/wait_for_batch"] = waited
        metrics["time/update"] = time.perf_counter() - start
        metrics["train/lr"] = self.optimizers().param_groups[0]["lr"]
        # The loggers get every update, with the env-frame count as step (the x axis RL runs
        # are compared on); callbacks read every value in last_metrics.
        values = {k: float(v) for k, v in metrics.items()}
        self.last_metrics = values
        for logger in self.loggers:
            logger.log_metrics(values, step=self.frames)
        # Lightning's callback metrics get what its callbacks read only (see read_by_callbacks).
        read = self._read_by_callbacks
        for names, prog_bar in ((PROGRESS_BAR, True), (sorted(read - set(PROGRESS_BAR)), False)):
            logged = {k: values[k] for k in names if k in read and k in values}
            if logged:
                self.log_dict(logged, prog_bar=prog_bar, logger=False, on_step=True, on_epoch=False)

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        # The class (for hts-rl evaluate), the progress counters (a resumed run logs at the
        # right env-frame steps) and the collector of every rank: with its batch in flight
        # described by where it starts, a resumed run goes on exactly as an uninterrupted one.
        checkpoint["hts_module_class"] = f"{type(self).__module__}.{type(self).__qualname__}"
        checkpoint["hts_progress"] = {
            "updates": self.updates,
            "frames": self.frames,
            "recent_returns": list(self.recent_returns),
            # The sent parameters the delayed gradient of the next batch may need.
            "behaviour_parameters": self.behaviour.state_dict(),
            "torch_rng_state": torch.get_rng_state(),
        }
        checkpoint["hts_collector"] = self.collection.state_dict(self.trainer.world_size)

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        progress = checkpoint.get("hts_progress")
        if progress is not None:
            self.updates = progress["updates"]
            self.frames = progress["frames"]
            self.recent_returns.clear()
            self.recent_returns.extend(progress["recent_returns"])
            self.behaviour.load_state_dict(progress["behaviour_parameters"])
            if "torch_rng_state" in progress:
                torch.set_rng_state(progress["torch_rng_state"])
        self.collection.load_state_dict(checkpoint.get("hts_collector"))

    def configure_callbacks(self) -> list[Callback]:
        return [_ShutDownCollector()]


class _ShutDownCollector(Callback):
    """Stops the collector's workers at the end of training and on any exception.

    A callback because Lightning calls ``on_exception`` on callbacks, not on the module.
    """

    def on_train_end(self, trainer, module: OnPolicyModule) -> None:
        module.collection.shutdown(keep_state=True)

    def on_exception(self, trainer, module: OnPolicyModule, exception: BaseException) -> None:
        module.collection.shutdown()

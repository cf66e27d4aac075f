"""The native backend: one envpool steps every replica; batches as the Python path gives them."""

from __future__ import annotations

import logging
import random
import sys
import threading
import time
from functools import partial

import numpy as np
import pytest
import torch
from tensordict.nn import TensorDictModule
from torch import nn

from hts_lightning import PPO, CountingEnv, HTSCollector
from hts_lightning.envs import env_factory, episode_ends
from hts_lightning.models import make_actor_critic
from tests.collectors.policies import (
    assert_bitwise_equal,
    perturb,
    set_choice,
    weight_readable_policy,
)
from tests.collectors.test_resume import STOP_AFTER, _uninterrupted_and_resumed
from tests.conftest import require_module, worker_processes

require_module("envpool")


def _run(make, policy, *, num_envs, sync_interval, batches, consumer_delay=None, **kwargs):
    """Batches of a run whose 'learner' perturbs the weights after each batch (and, with
    ``consumer_delay``, takes a random time to do it)."""
    generator, timing = torch.Generator().manual_seed(5), random.Random(kwargs.pop("timing", 0))
    out = []
    with HTSCollector(
        make,
        policy,
        num_envs=num_envs,
        sync_interval=sync_interval,
        total_frames=num_envs * sync_interval * batches,
        seed=11,
        **kwargs,
    ) as collector:
        for batch in collector:
            out.append(batch)
            if consumer_delay:
                time.sleep(timing.uniform(0, consumer_delay))
            perturb(policy, generator, scale=0.3)
            collector.update_policy_weights_()
    return torch.stack(out)


def _env_kwargs(env_id: str) -> dict:
    return {"rewards": "scoring"} if env_id == FOOTBALL else {}


def _cartpole_policy():
    """The CartPole recipe's actor: its 64-cell layers are wide enough for MKL's AVX-512
    kernels to round a row by its place in the chunk (where a CPU has them)."""
    env = env_factory("CartPole-v1", backend="envpool")()
    torch.manual_seed(1)
    return make_actor_critic(env.observation_spec, env.action_spec).get_policy_operator()


def _pong_policy():
    env = env_factory("ALE/Pong-v5", backend="envpool")()
    torch.manual_seed(0)
    model = make_actor_critic(env.observation_spec, env.action_spec)
    return model.get_policy_operator()


def _football_policy():
    env = env_factory(FOOTBALL, backend="envpool", rewards="scoring")()
    torch.manual_seed(0)
    return make_actor_critic(env.observation_spec, env.action_spec).get_policy_operator()


FOOTBALL = "GFootball/academy_empty_goal_close"


def test_auto_backend_picks_envpool_for_an_envpool_factory():
    make = env_factory("CartPole-v1", backend="envpool")
    with HTSCollector(make, _cartpole_policy(), num_envs=2, num_workers=1, sync_interval=4) as c:
        assert c.backend == "envpool" and c.inference == "workers"  # the pool in a process
    with HTSCollector(
        env_factory("CartPole-v1"), _cartpole_policy(), num_envs=2, num_workers=0, sync_interval=4
    ) as c:
        assert c.backend == "python"


def test_episodic_life_batches_report_games_as_the_python_path_does():
    """Breakout with episodic life: a life loss is done (the training episode), the game goes
    on, the statistics run over the game and ``"game_over"`` marks its end; the native
    backend's batches are the Python engine's over ``EnvpoolReplica``, bitwise."""
    make = env_factory("ALE/Breakout-v5", backend="envpool", episodic_life=True, fire_reset=True)

    def policy():
        torch.manual_seed(0)
        return make_actor_critic(make().observation_spec, make().action_spec).get_policy_operator()

    common = dict(num_envs=2, sync_interval=100, batches=3)
    native = _run(make, policy(), backend="envpool", num_workers=2, **common)
    python = _run(make, policy(), backend="python", num_workers=0, **common)
    assert_bitwise_equal(native, python)
    # One replica's 300 steps in order: [replicas, batches x steps].
    steps = torch.cat(native.unbind(0), dim=1)
    after = steps["next"]
    done, game_over = after["done"].squeeze(-1), after["game_over"].squeeze(-1)
    assert torch.equal(episode_ends(after), game_over)
    lives_lost = done & ~game_over
    assert lives_lost.sum() >= 4 and game_over.sum() >= 1 and not (game_over & ~done).any()
    for replica in range(2):
        count = after["step_count"][replica].squeeze(-1)
        ends = torch.nonzero(game_over[replica]).squeeze(-1).tolist()
        starts = [0] + [end + 1 for end in ends]
        for start, end in zip(starts, ends, strict=False):
            # a game's length counts every step of its lives
            assert count[end].item() == end - start + 1
        for t in torch.nonzero(lives_lost[replica]).squeeze(-1).tolist():
            if t + 1 < steps.shape[1]:  # the next life starts with the game's statistics
                root = steps[replica, t + 1]
                assert root["step_count"].item() == count[t].item()
                assert root["episode_reward"].item() == after["episode_reward"][replica, t].item()


@pytest.mark.parametrize(
    ("env_id", "make_policy", "num_envs", "sync_interval", "batches"),
    [
        ("CartPole-v1", _cartpole_policy, 4, 40, 3),
        ("ALE/Pong-v5", _pong_policy, 3, 12, 2),
        (FOOTBALL, _football_policy, 3, 40, 2),
    ],
    ids=["cartpole", "pong", "football"],
)
def test_native_batches_equal_the_python_path_over_the_same_envs(
    env_id, make_policy, num_envs, sync_interval, batches
):
    """Same replica seeds, same resets, same bookkeeping: the native backend's batches are the
    Python engine's over single-env envpools (TorchRL's StepCounter/RewardSum/RewardClipping
    there, the executor's own arithmetic here; football's stacked frames in each), bitwise,
    with episodes ending mid-batch."""
    make = env_factory(env_id, backend="envpool", **_env_kwargs(env_id))
    common = dict(num_envs=num_envs, sync_interval=sync_interval, batches=batches)
    native = _run(make, make_policy(), backend="envpool", num_workers=2, **common)
    python = _run(make, make_policy(), backend="python", num_workers=0, **common)
    assert_bitwise_equal(native, python)
    if env_id == FOOTBALL:  # a lost ball ends the academy's episodes early
        assert native["next", "done"].sum() >= 1
        stacked = native["next", "observation"][..., :12, :, :]
        assert torch.equal(stacked, native["observation"][..., 4:, :, :])
    if env_id == "CartPole-v1":
        assert native["next", "done"].sum() >= 4  # resets happened inside the batches
        ends, after = native["next", "done"], native["next"]
        # The raw return at an episode's end is its length (reward 1 per step).
        assert torch.equal(after["episode_reward"][ends], after["step_count"][ends].float())


@pytest.mark.parametrize(
    ("env_id", "make_policy", "num_envs", "sync_interval", "batches", "chunk"),
    [
        ("CartPole-v1", _cartpole_policy, 6, 30, 4, 4),
        ("ALE/Pong-v5", _pong_policy, 4, 10, 2, 2),
        (FOOTBALL, _football_policy, 4, 30, 2, 2),
    ],
    ids=["cartpole", "pong", "football"],
)
def test_bitwise_identical_with_1_2_4_threads_either_inference_and_varied_consumer_timing(
    env_id, make_policy, num_envs, sync_interval, batches, chunk
):
    make = env_factory(env_id, backend="envpool", **_env_kwargs(env_id))
    runs = [
        _run(
            make,
            make_policy(),
            num_envs=num_envs,
            sync_interval=sync_interval,
            batches=batches,
            num_workers=threads,
            inference_batch_size=chunk,
            consumer_delay=delay,
            timing=threads,
            inference=inference,
        )
        for threads, delay, inference in [
            (1, None, "workers"),
            (2, 0.05, "workers"),
            (4, 0.02, "workers"),
            (2, 0.05, "main"),
            (0, None, "main"),
        ]
    ]
    for run in runs[1:]:
        assert_bitwise_equal(runs[0], run)
    # The per-transition behaviour version: batch k was acted by update k-1.
    versions = runs[0]["policy_version"]
    assert [int(v.unique()) for v in versions] == [max(k - 1, 0) for k in range(batches)]


class _CountCalls(nn.Module):
    """Deterministic 'push left' policy that counts its calls in a class attribute (shared by
    the collector's deep copy)."""

    calls = 0

    def forward(self, observation: torch.Tensor) -> torch.Tensor:
        type(self).calls += 1
        return nn.functional.one_hot(torch.zeros(observation.shape[:-1], dtype=torch.long), 2)


def _waits_for_the_consumer(collector) -> bool:
    """Whether the collection thread (inference in this process) has finished the batch it
    was asked for and is blocked taking the next request, none queued: until the consumer
    takes that batch, nothing more is collected and the policy is not called."""
    runner = collector._backend._collection
    if runner._results.empty() or not runner._requests.empty():
        return False
    frame = sys._current_frames().get(runner._thread.ident)
    while frame is not None:
        if frame.f_code.co_name == "get" and frame.f_locals.get("self") is runner._requests:
            return True
        frame = frame.f_back
    return False


def _calls_once_idle(collector, limit: float = 60.0) -> int:
    """The policy's call count once the collector waits for the consumer (``limit`` only
    keeps a broken collector from hanging the suite)."""
    deadline = time.monotonic() + limit
    while not _waits_for_the_consumer(collector):
        assert time.monotonic() < deadline, "the collector never finished its batch"
        time.sleep(0.01)
    # One finished batch waits, not two: the collector did not run ahead.
    assert collector._backend._collection._results.qsize() == 1
    return _CountCalls.calls


def test_next_batch_is_collected_while_the_consumer_holds_the_last_one_and_no_further():
    """Overlap without clocks: while the consumer holds batch k, batch k+1 is acted on in full
    (inference calls happen) and batch k+2 is not started (the count then stays put). With
    inference in this process, where the counter can be read; the worker-process mode shares
    the worker-inference path's overlap tests."""
    _CountCalls.calls = 0
    policy = TensorDictModule(_CountCalls(), in_keys=["observation"], out_keys=["action"])
    make = env_factory("CartPole-v1", backend="envpool")
    with HTSCollector(
        make,
        policy,
        num_envs=4,
        num_workers=2,
        sync_interval=25,
        total_frames=4 * 25 * 3,
        inference="main",
    ) as collector:
        iterator = iter(collector)
        next(iterator)
        idle = _calls_once_idle(collector)  # batch 1 done, batch 2 waits for the consumer
        # Batches 0 and 1 acted on in full, each at least 25 steps x 4 replicas / 4 rows per
        # call (batch 1 may finish before the yield of batch 0 is read: no count at the yield).
        assert idle >= 2 * 25
        assert _CountCalls.calls == idle  # not running two batches ahead
        batch = next(iterator)
        assert batch["next", "step_count"].shape == (4, 25, 1)
        assert _calls_once_idle(collector) > idle  # handing batch 1 out started batch 2


@pytest.mark.parametrize("inference", ["workers", "main"])
@pytest.mark.parametrize("learner_seconds", [0.0, 0.2], ids=["fast-learner", "slow-learner"])
def test_batch_k_uses_the_weights_of_update_k_minus_1(learner_seconds, inference):
    policy = weight_readable_policy(num_actions=2)
    set_choice(policy, 0)
    make = env_factory("CartPole-v1", backend="envpool")
    with HTSCollector(
        make,
        policy,
        num_envs=4,
        num_workers=2,
        sync_interval=8,
        total_frames=4 * 8 * 6,
        inference=inference,
    ) as collector:
        for k, batch in enumerate(collector):
            behaviour = max(k - 1, 0)
            assert batch["policy_version"].eq(behaviour).all()
            assert batch["action"].argmax(-1).eq(behaviour % 2).all()
            assert collector.policy_version - behaviour == (0 if k == 0 else 1)
            time.sleep(learner_seconds)
            set_choice(policy, (k + 1) % 2)
            collector.update_policy_weights_()
    assert k == 5


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    ("num_envs", "chunk", "sync_interval", "threads"),
    [(3, 8, 7, 2), (5, 4, 1, 2), (5, 4, 13, 4), (2, 1, 9, 1)],
    ids=["fewer-envs-than-a-chunk", "every-step-a-boundary", "ragged-chunks", "chunk-of-one"],
)
def test_holding_replicas_at_the_boundary_never_deadlocks_nor_skips_a_step(
    num_envs, chunk, sync_interval, threads
):
    """'Push left' ends CartPole episodes in ~10 steps, so resets fall on batch boundaries too.
    Every replica steps exactly once per (replica, step) slot: its step counts run on without
    a gap or a repeat across batches and resets."""
    _CountCalls.calls = 0
    policy = TensorDictModule(_CountCalls(), in_keys=["observation"], out_keys=["action"])
    make = env_factory("CartPole-v1", backend="envpool")
    batches = 30 // sync_interval + 3
    with HTSCollector(
        make,
        policy,
        num_envs=num_envs,
        num_workers=threads,
        sync_interval=sync_interval,
        inference_batch_size=chunk,
        total_frames=num_envs * sync_interval * batches,
    ) as collector:
        data = torch.cat(list(collector), dim=1)  # [replicas, all steps]
    root, after, done = data["step_count"], data["next", "step_count"], data["next", "done"]
    assert torch.equal(after, root + 1)
    expected_root = torch.where(done[:, :-1], 0, after[:, :-1])
    assert torch.equal(root[:, 1:], expected_root)
    assert root[:, 0].eq(0).all() and done.sum() >= num_envs
    assert torch.equal(
        data["observation"][:, 1:][~done[:, :-1, 0]],
        data["next", "observation"][:, :-1][~done[:, :-1, 0]],
    )


def test_resume_reseeds_every_replica_deterministically_and_says_so(caplog):
    """envpool cannot save its envs: a restored collector re-seeds each replica from the seed,
    its global index and the batch count (the rule of every env without state), so the
    resumed batches are reproducible, equal those of the Python path over the same envs, and
    start new episodes."""
    make = env_factory("CartPole-v1", backend="envpool")
    runs = {}
    for backend in ("envpool", "envpool", "python"):
        with caplog.at_level(logging.WARNING, logger="hts_lightning.collectors.hts"):
            caplog.clear()
            runs.setdefault(backend, []).append(
                _uninterrupted_and_resumed(make, _cartpole_policy, num_workers=0, backend=backend)
            )
            assert "replicas [0, 1, 2, 3] cannot save their state" in caplog.text
    (expected, got), (_, again) = runs["envpool"]
    _, python = runs["python"][0]
    assert_bitwise_equal(got, again)
    assert_bitwise_equal(got, python)
    resumed = got[STOP_AFTER:]
    assert resumed[0]["step_count"][:, 0, 0].eq(0).all()  # new episodes
    assert torch.equal(got[:STOP_AFTER]["observation"], expected[:STOP_AFTER]["observation"])
    assert not torch.equal(resumed["observation"], expected[STOP_AFTER:]["observation"])
    # Trajectory ids go on: the interrupted episodes count as ended.
    before = expected[STOP_AFTER - 1]["collector", "traj_ids"][:, -1]
    assert resumed[0]["collector", "traj_ids"][:, 0].gt(before).all()


def test_shards_get_the_replicas_of_one_collector():
    """Replica seeds depend on the global index: two shards (replica_offset 0 and 2, as two
    hts_ddp ranks) collect exactly the halves of one 4-replica collector (at one inference
    shape: CPU kernels round differently at another)."""
    make = env_factory("CartPole-v1", backend="envpool")
    common = dict(sync_interval=20, batches=2, num_workers=1, inference_batch_size=2)
    whole = _run(make, _cartpole_policy(), num_envs=4, **common)
    halves = [
        _run(make, _cartpole_policy(), num_envs=2, replica_offset=offset, **common)
        for offset in (0, 2)
    ]
    for key in ("observation", ("next", "reward"), "action", "action_log_prob"):
        assert torch.equal(torch.cat([h[key] for h in halves], dim=1), whole[key]), key


@pytest.mark.parametrize("inference", ["workers", "main"])
def test_shutdown_with_a_batch_in_flight_leaves_no_process_or_thread(inference):
    make = env_factory("ALE/Pong-v5", backend="envpool")
    collector = HTSCollector(
        make,
        _pong_policy(),
        num_envs=4,
        num_workers=2,
        sync_interval=200,
        total_frames=-1,
        inference=inference,
    )
    next(iter(collector))  # the next batch is now being collected
    threads = {t.name for t in threading.enumerate()}
    assert ("hts-collection" in threads) == (inference == "main")
    assert len(worker_processes()) == (1 if inference == "workers" else 0)
    collector.shutdown()
    assert "hts-collection" not in {t.name for t in threading.enumerate()}
    assert worker_processes() == []
    with pytest.raises(RuntimeError, match="shut down"):
        next(iter(collector))


def test_bad_choices_are_refused_before_anything_starts():
    make = env_factory("CartPole-v1", backend="envpool")
    policy = _cartpole_policy()
    with pytest.raises(ValueError, match="EnvpoolFactory"):
        HTSCollector(partial(CountingEnv), policy, num_envs=2, sync_interval=2, backend="envpool")
    with pytest.raises(ValueError, match="needs num_workers >= 1"):
        HTSCollector(make, policy, num_envs=2, num_workers=0, sync_interval=2, inference="workers")
    with pytest.raises(ValueError, match="on_env_error='restart' needs backend='python'"):
        HTSCollector(make, policy, num_envs=2, sync_interval=2, on_env_error="restart")
    with pytest.raises(ValueError, match="backend must be"):
        HTSCollector(make, policy, num_envs=2, sync_interval=2, backend="gpu")


def test_a_recv_never_waits_for_more_envs_than_are_stepping():
    """A pool that receives a chunk of 3 envs per ``recv``, with one replica stepping and two
    held: fillers make up the number, so ``wait_ready`` returns that replica's step (and only
    it), and the held replicas are never stepped."""
    from torchrl.envs.utils import ExplorationType

    from hts_lightning.collectors.backends.envpool import EnvpoolExecutor
    from hts_lightning.collectors.core.layout import Layout
    from hts_lightning.collectors.core.policy_runner import PolicyRunner

    make = env_factory("CartPole-v1", backend="envpool")
    runner = PolicyRunner(
        _cartpole_policy(), device=torch.device("cpu"), exploration_type=ExplorationType.RANDOM
    )
    slots = Layout.probe(make, runner, 3).slots(3)
    executor = EnvpoolExecutor(
        factory=make, seeds=[1, 2, 3], num_threads=1, slots=slots, inference_batch_size=3
    )
    executor.start()
    try:
        slots["action", "action"][:] = torch.tensor([1, 0])
        first = slots["root", "observation"].clone()
        for step in range(1, 4):
            executor.send(np.array([1]))
            assert executor.wait_ready().tolist() == [1]
            assert slots["next", "step_count"][:, 0].tolist() == [0, step, 0]
        assert torch.equal(slots["root", "observation"][[0, 2]], first[[0, 2]])
        executor.send(np.array([0, 2]))
        assert sorted(executor.wait_ready().tolist()) == [0, 2]
    finally:
        executor.close()


def test_several_worker_processes_collect_the_batches_of_one_pool():
    """8 replicas in chunks of 2 with W=4: four worker processes of two replicas each (one
    filler each), boundaries at every few steps and episodes ending inside batches: the
    batches are bitwise those of one pool in this process."""
    make = env_factory("CartPole-v1", backend="envpool")
    common = dict(num_envs=8, sync_interval=5, batches=3, inference_batch_size=2)
    workers = _run(make, _cartpole_policy(), num_workers=4, inference="workers", **common)
    main = _run(make, _cartpole_policy(), num_workers=1, inference="main", **common)
    assert_bitwise_equal(workers, main)
    assert workers["next", "done"].sum() >= 1


@pytest.mark.parametrize(
    ("env_id", "env_kwargs"),
    [("CartPole-v1", {}), ("ALE/Pong-v5", {}), ("ALE/Breakout-v5", {"episodic_life": True})],
    ids=["cartpole", "pong", "breakout-games"],
)
def test_the_executors_pool_calls_give_what_envpools_public_calls_give(env_id, env_kwargs):
    """The adapter of envpool 1.2.5's private ``_send``/``_recv`` against ``send``/``recv``:
    two pools of the same seeds, stepped with the same actions, over episode ends (with
    episodic life, over lives lost and games ended: ``info["terminated"]``)."""
    from hts_lightning.collectors.backends.envpool import _PoolCalls

    make = env_factory(env_id, backend="envpool", **env_kwargs)
    games = make.reports_games
    public, private = (make.make_pool(seeds=[3, 4, 5], num_threads=1, batch_size=2) for _ in "ab")
    calls = _PoolCalls(private, games=games)
    assert calls._raw  # envpool 1.2.5's layout: the private calls are the ones in use
    public.async_reset()
    private.async_reset()
    actions, ended, games_ended = np.random.default_rng(0), 0, 0
    for _ in range(400 if games else 60):  # Breakout's 5 lives: ~150 steps of NOOP or FIRE
        observation, reward, terminated, truncated, info = public.recv()
        got = calls.recv()
        game_over = truncated | (info["terminated"].astype(bool) if games else terminated)
        for mine, theirs in zip(
            got,
            (info["env_id"], observation, reward, terminated, truncated, game_over),
            strict=True,
        ):
            assert mine.dtype == theirs.dtype
            np.testing.assert_array_equal(mine, theirs)
        ended += int(terminated.sum() + truncated.sum())
        games_ended += int(info["terminated"].sum()) if games else 0
        action = actions.integers(0, 2, size=len(observation)).astype(np.int32)
        public.send(action, info["env_id"])
        calls.send(action, got[0])
    assert env_id != "CartPole-v1" or ended > 0  # the resets were compared too
    assert not games or games_ended > 0  # and the game ends


def test_a_module_takes_any_thread_count_for_envpool_and_still_divides_python_workers():
    """envpool's threads take any env: 3 threads for 8 replicas train; 3 Python worker
    processes for 8 replicas are refused, naming the fix."""
    from tests.conftest import quiet_trainer

    module = PPO(env_id="CartPole-v1", env_backend="envpool", num_envs=8, num_workers=3,
                 sync_interval=8, total_frames=64 * 2, epochs=1, minibatches=1)  # fmt: skip
    quiet_trainer().fit(module)
    assert module.updates == 2
    with pytest.raises(ValueError, match="num_workers"):
        PPO(env_id="CartPole-v1", num_envs=8, num_workers=3)

"""The native backend's executor: every replica is an env of one envpool (C++ threads). It
is an :class:`Executor` like the others, so the engine's rules hold unchanged.

envpool in asynchronous mode steps exactly the envs it is sent, and its ``recv`` returns
whichever have finished. A replica at the batch boundary is held simply by not sending it.
``recv`` returns ``batch_size`` envs at once (here one inference chunk: one call and one
numpy pass per chunk, not per env) and blocks until that many are ready, while near the
boundary, with replicas held, fewer may be stepping. So the pool has ``batch_size - 1``
filler envs besides the replicas: before a ``recv`` with fewer than ``batch_size`` envs in
flight, idle fillers are sent to make up the number and their results dropped, so a ``recv``
never waits for an env that is not stepping. Fillers step only then (the last steps of a
batch), never touch a replica, and the engine's rules make the batch independent of which
replicas arrive together: it is the same as with one env per ``recv``.

A finished episode is reset by sending the env once more (envpool's auto-reset; the action is
ignored); that reset is not a transition, and the replica is reported ready only once its
first observation is in. Resets and fillers wait for the next ``send`` of actions (or, if none
comes first, the next ``recv``) and go with it: one envpool call per chunk, not two.

The executor keeps what ``StepCounter``, ``RewardSum`` and ``RewardClipping`` keep on the
Python path (step count, raw return, clipped reward), so the slots get the same keys and
values as a TorchRL env of the same replica (tested bitwise against ``EnvpoolReplica``). Atari
with episodic life keeps them over the game, not the life, and marks where a game ended
(``"game_over"``), as ``EnvpoolReplica`` does.
"""

from __future__ import annotations

import numpy as np
from tensordict import TensorDictBase

from hts_lightning._compat import envpool_recv, envpool_send
from hts_lightning.collectors.backends.protocols import Executor
from hts_lightning.envs._shared import GAME_OVER
from hts_lightning.envs.envpool import EnvpoolFactory

_ROOT_KEYS = ("observation", "done", "terminated", "truncated", "episode_reward", "step_count")
_NEXT_KEYS = (*_ROOT_KEYS, "reward")
_FILLER_SEED = 0  # a filler's trajectory is never read


class EnvpoolExecutor(Executor):
    """Steps ``len(slots)`` replicas in one envpool; replica i's env is seeded ``seeds[i]``."""

    def __init__(
        self,
        *,
        factory: EnvpoolFactory,
        seeds: list[int],
        num_threads: int,
        slots: TensorDictBase,
        inference_batch_size: int,
    ):
        root, next_ = slots.get("root"), slots.get("next")
        self._games = factory.reports_games
        next_keys = (*_NEXT_KEYS, GAME_OVER) if self._games else _NEXT_KEYS
        #: Root keys no step changes (a root is never done: an ended episode is reset first,
        #: nor is its game over), left at the layout's False; the engine writes them once a
        #: batch.
        self.constant_root_keys = ("done", "terminated", "truncated", GAME_OVER)
        #: The next keys :meth:`write_steps_into` writes straight into a batch's storage.
        self.next_keys_written = next_keys
        missing = sorted(
            {f"root {k}" for k in _ROOT_KEYS if k not in root}
            | {f"next {k}" for k in next_keys if k not in next_}
        )
        if missing:
            raise ValueError(f"The envpool backend needs the Python path's keys; missing {missing}")
        self._factory = factory
        self._seeds = list(seeds)
        self._num_threads = num_threads
        self._num_envs = slots.batch_size[0]
        self._batch = min(inference_batch_size, self._num_envs)  # envs per recv
        # numpy views of the shared slots, one row per replica (the (1,)-shaped keys as
        # vectors): a recv's results are written with one fancy assignment per key.
        self._root = {k: _rows(root.get(k).numpy()) for k in _ROOT_KEYS}
        self._next = {k: _rows(next_.get(k).numpy()) for k in next_keys}
        self._action = slots.get(("action", "action")).numpy()
        self._clip = factory.clip_rewards
        self._returns = np.zeros(self._num_envs, dtype=np.float32)
        self._steps = np.zeros(self._num_envs, dtype=np.int64)
        self._resetting = np.zeros(self._num_envs, dtype=bool)
        self._in_flight = 0  # replicas stepping or resetting
        self._idle_fillers: list[int] = []  # fillers (env ids from num_envs on) not stepping
        self._idle_ids: list[np.ndarray] = []  # resets and fillers to send with the idle action
        self._storage: tuple[dict, np.ndarray] | None = None  # see write_steps_into
        self._stopping = False
        self._pool = self._calls = self._frames = None

    def start(self) -> None:
        """Build the pool, reset every env and publish the first observations."""
        self._pool = self._factory.make_pool(
            seeds=self._seeds + [_FILLER_SEED] * (self._batch - 1),
            num_threads=self._num_threads,
            batch_size=self._batch,
        )
        spec = self._pool.spec.action_array_spec["action"]
        self._idle_action = np.zeros((self._batch, *spec.shape[1:]), dtype=spec.dtype)
        space = self._pool.action_space
        self._discrete = hasattr(space, "n")
        # A box action reaches the env clipped to its bounds (a Gaussian's sample may not be).
        self._bounds = None if self._discrete else (space.low, space.high)
        self._calls = _PoolCalls(self._pool, games=self._games)
        # The replicas' stacked frames, where the factory stacks them (the football port)
        self._frames = self._factory.frames(self._num_envs, self._pool.observation_space)
        self._pool.async_reset()
        self._resetting[:] = True
        self._in_flight = self._num_envs
        while self._in_flight:  # the engine's batch starts by acting on every replica
            self._receive()

    def send(self, replicas: np.ndarray) -> None:
        action = self._action[replicas]
        action = action.argmax(-1) if self._discrete else np.clip(action, *self._bounds)
        action = action.astype(self._idle_action.dtype)
        env = replicas.astype(np.int32)
        if self._idle_ids:  # the resets and fillers waiting go in the same call
            env = np.concatenate([env, *self._idle_ids])
            action = np.concatenate([action, self._idle_action[: env.size - replicas.size]])
            self._idle_ids = []
        self._calls.send(action, env)
        self._in_flight += replicas.size

    def write_steps_into(self, next_: dict, row: np.ndarray) -> None:
        """Steps go into the batch storage, not the slots: the engine copies nothing (a gather
        and a scatter of 7 keys a ``recv``). The engine moves a replica's row on only after
        ``wait_ready`` returned it: a step is written where it belongs."""
        self._storage = ({k: _rows(next_[k]) for k in self.next_keys_written}, row)

    def wait_ready(self) -> np.ndarray:
        """The replicas whose step (and, at an episode end, reset) finished: those of one
        ``recv`` (an inference chunk at most; fewer where episodes ended or few are in
        flight), or of the next where one brought only resets and fillers."""
        while self._in_flight and not self._stopping:
            ready = self._receive()
            if ready.size:
                return ready
        return np.empty(0, dtype=np.int64)

    def _receive(self) -> np.ndarray:
        """One ``recv`` of ``batch_size`` envs (idle fillers sent first where fewer are in
        flight); the replicas among them that are now ready."""
        fillers_in_flight = self._batch - 1 - len(self._idle_fillers)  # the others are idle
        short = self._batch - self._in_flight - fillers_in_flight
        if short > 0:  # short < batch_size: a replica is in flight (start: all fillers are)
            fillers, self._idle_fillers = self._idle_fillers[:short], self._idle_fillers[short:]
            self._idle_ids.append(np.array(fillers, dtype=np.int32))
        if self._idle_ids:
            env = np.concatenate(self._idle_ids)
            self._idle_ids = []
            self._calls.send(self._idle_action[: env.size], env)
        received = self._calls.recv()  # env, observation, reward, terminated, truncated, game over
        env = received[0]
        real = env < self._num_envs
        if not real.all():
            self._idle_fillers.extend(env[~real].tolist())
            received = [a[real] for a in received]
            env = received[0]
        self._in_flight -= env.size
        resetting = self._resetting[env]
        if not resetting.any():  # most recvs: steps only
            return self._record_steps(*received)
        reset = env[resetting]  # their first observation is in: ready, nothing recorded
        self._resetting[reset] = False
        first = received[1][resetting]
        if self._frames is not None:
            first = self._frames.reset(reset, first)
        # The statistics were zeroed where the episode (the game) ended: a life goes on with them.
        self._publish_root(reset, first, self._returns[reset], self._steps[reset])
        stepping = ~resetting
        stepped = [a[stepping] for a in received]
        env = self._record_steps(*stepped) if stepped[0].size else stepped[0]
        return np.concatenate([reset, env]).astype(np.int64)

    def _record_steps(
        self, env, observation, reward, terminated, truncated, game_over
    ) -> np.ndarray:
        """Write the steps of ``env`` into the slots; the replicas ready to act again (int64).
        ``game_over``: where the statistics end (the episode's end but for episodic life)."""
        raw = reward.astype(np.float32)
        done = terminated | truncated
        if self._frames is not None:
            observation = self._frames.step(env, observation)
        # The returns and step counts gathered once, for the slots' next and root rows.
        returns = self._returns[env] + raw
        steps = self._steps[env] + 1
        self._returns[env] = np.where(game_over, 0.0, returns)
        self._steps[env] = np.where(game_over, 0, steps)
        if self._storage is None:
            out, at = self._next, env
        else:
            out, row = self._storage
            at = row[env]
        out["observation"][at] = observation
        out["reward"][at] = np.clip(raw, -1.0, 1.0) if self._clip else raw
        out["done"][at] = done
        out["terminated"][at] = terminated
        out["truncated"][at] = truncated
        out["episode_reward"][at] = returns
        out["step_count"][at] = steps
        if self._games:
            out[GAME_OVER][at] = game_over
        if done.any():  # auto-reset: the env resets on its next send, whatever the action
            ended = env[done]
            self._resetting[ended] = True
            self._idle_ids.append(ended.astype(np.int32))  # sent before the next recv
            self._in_flight += ended.size
            going = ~done
            env, observation = env[going], observation[going]
            returns, steps = returns[going], steps[going]
        self._publish_root(env, observation, returns, steps)
        return env.astype(np.int64)

    def _publish_root(self, replicas: np.ndarray, observation, returns, steps) -> None:
        root = self._root
        root["observation"][replicas] = observation
        root["episode_reward"][replicas] = returns
        root["step_count"][replicas] = steps
        # done, terminated and truncated of a root are always False: set once by the layout.

    def batch_ends(self) -> tuple[list, list]:
        """No env state (envpool cannot save it: a resumed collector re-seeds), no restarts."""
        return [(None, None)] * self._num_envs, []

    def stopping(self) -> bool:
        return self._stopping

    def stop_workers(self, timeout: float = 5.0) -> None:
        self._stopping = True

    def close(self, timeout: float = 5.0) -> None:
        self._stopping = True
        # envpool's destructor finishes the steps in flight, joins its threads
        self._pool = self._calls = None


class _PoolCalls:
    """envpool 1.2.5's ``send``/``recv`` without their Python wrappers (private calls); with
    ``games``, ``recv`` also reads where an Atari game ended (``info["terminated"]``: all lives
    lost) and else gives the episode's end.

    The public ``send`` rebuilds the pool's config dict and re-checks the action on every call,
    and ``recv`` builds the gymnasium tuple through ``optree``: ~20 us of a chunk's ~40 us of
    envpool calls (benchmarks/RESULTS.md). For a single-player pool (the Atari and
    classic-control envs served here) they amount to this: ``_send`` takes the arrays in the
    order of ``_spec._action_keys`` (``players.env_id`` = ``env_id``), ``_recv`` returns the
    state arrays in the order of ``_state_keys`` and ``terminated`` is ``done & ~trunc``. A
    pool laid out otherwise (another envpool version) goes through the public calls.
    """

    _ACTIONS = ["env_id", "players.env_id", "action"]
    _STATES = ("info:env_id", "obs", "reward", "done", "trunc", "info:terminated")

    def __init__(self, pool, *, games: bool = False):
        self._pool = pool
        self._games = games
        states = self._STATES if games else self._STATES[:-1]
        keys = list(getattr(pool, "_state_keys", ()))
        actions = list(getattr(getattr(pool, "_spec", None), "_action_keys", ()))
        self._raw = (
            sorted(actions) == sorted(self._ACTIONS)
            and set(states) <= set(keys)
            and pool.config.get("max_num_players", 1) == 1
        )
        if self._raw:
            self._order = [self._ACTIONS.index(k) for k in actions]
            self._at = [keys.index(k) for k in states]

    def send(self, action: np.ndarray, env: np.ndarray) -> None:
        """Step the envs ``env`` (int32) with ``action`` (the pool's dtype, C order)."""
        if not self._raw:
            self._pool.send(action, env)
            return
        arrays = (env, env, action)
        envpool_send(self._pool, [arrays[i] for i in self._order])

    def recv(self) -> list:
        """``[env_id, observation, reward, terminated, truncated, game_over]`` of one ``recv``
        (``game_over``: the game's end with ``games``, else the episode's)."""
        if not self._raw:
            observation, reward, terminated, truncated, info = self._pool.recv()
            env, game_lost = info["env_id"], info.get("terminated")
        else:
            state = envpool_recv(self._pool)
            env, observation, reward, done, truncated, *game_lost = (state[i] for i in self._at)
            terminated, game_lost = done & ~truncated, (game_lost or [None])[0]
        ended = truncated | (game_lost.astype(bool) if self._games else terminated)
        return [env, observation, reward, terminated, truncated, ended]


def _rows(array: np.ndarray) -> np.ndarray:
    """``array`` with a ``(1,)``-shaped entry per row seen as a vector (a view)."""
    return array[:, 0] if array.shape[1:] == (1,) else array

"""Stable-Baselines3's A2C on an Atari game, printing CleanRL's episode lines: a maintained
A2C on another env stack (gymnasium's ALE with SB3's Atari wrappers) beside a recipe's.

SB3's ``make_atari_env`` does what OpenAI baselines' A2C does: no-op starts, 4-frame skip with
max-pooling, a lost life ends the training episode, FIRE after reset, 84x84 grey frames,
rewards clipped to their sign, and its Monitor counts whole games' raw scores (the lines
printed). ``CnnPolicy`` is the Nature CNN initialized as baselines do (orthogonal, policy
output gain 0.01); frames are stacked 4 deep.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class A2CSettings:
    """The recipe's A2C settings in SB3's terms."""

    num_envs: int
    n_steps: int
    lr: float
    lr_decay_steps: int  # the lr falls linearly to 0 over these agent steps
    gamma: float
    gae_lambda: float
    entropy_coef: float
    value_coef: float  # SB3's value loss is the mean squared error, as TorchRL's "l2"
    max_grad_norm: float

    @classmethod
    def from_module_args(cls, args: dict) -> A2CSettings:
        if args.get("optimizer") != "rmsprop_tf" or not args.get("orthogonal_init"):
            raise SystemExit("the SB3 cell trains baselines' A2C: TF's RMSprop, orthogonal init")
        return cls(
            num_envs=args["num_envs"],
            n_steps=args["sync_interval"],
            lr=args["lr"],
            lr_decay_steps=args["total_frames"] if args.get("lr_schedule") == "linear" else 0,
            gamma=args["gamma"],
            gae_lambda=args["gae_lambda"],
            entropy_coef=args["entropy_coef"],
            value_coef=args["value_coef"],
            max_grad_norm=args["max_grad_norm"],
        )


def gymnasium_id(env_id: str) -> str:
    """The ALE id SB3's Atari wrappers expect: ``ALE/Pong-v5`` -> ``PongNoFrameskip-v4`` (no
    sticky actions, the wrappers skip frames), the setting of baselines' benchmark."""
    return f"{env_id.removeprefix('ALE/').removesuffix('-v5')}NoFrameskip-v4"


def train(env_id: str, settings: A2CSettings, *, steps: int, seed: int) -> None:
    """Train to ``steps`` agent steps, printing ``global_step=N, episodic_return=R`` at every
    game's end and ``global_step=N`` at every 10th update."""
    import ale_py
    import gymnasium
    from stable_baselines3 import A2C
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_atari_env
    from stable_baselines3.common.sb2_compat.rmsprop_tf_like import RMSpropTFLike
    from stable_baselines3.common.vec_env import VecFrameStack

    gymnasium.register_envs(ale_py)

    class PrintGames(BaseCallback):
        def _on_step(self) -> bool:
            for info in self.locals["infos"]:
                if "episode" in info:
                    score = info["episode"]["r"]
                    print(f"global_step={self.num_timesteps}, episodic_return={score}")
            if self.n_calls % (10 * settings.n_steps) == 0:
                print(f"global_step={self.num_timesteps}", flush=True)
            return True

    def lr(progress_remaining: float) -> float:
        if not settings.lr_decay_steps:
            return settings.lr
        done = (1.0 - progress_remaining) * steps
        return settings.lr * max(0.0, 1.0 - done / settings.lr_decay_steps)

    env = VecFrameStack(
        make_atari_env(gymnasium_id(env_id), n_envs=settings.num_envs, seed=seed), n_stack=4
    )
    model = A2C(
        "CnnPolicy",
        env,
        learning_rate=lr,
        n_steps=settings.n_steps,
        gamma=settings.gamma,
        gae_lambda=settings.gae_lambda,
        ent_coef=settings.entropy_coef,
        vf_coef=settings.value_coef,
        max_grad_norm=settings.max_grad_norm,
        policy_kwargs={"optimizer_class": RMSpropTFLike, "optimizer_kwargs": {"eps": 1e-5}},
        seed=seed,
        device="cpu",
    )
    model.learn(total_timesteps=steps, callback=PrintGames())

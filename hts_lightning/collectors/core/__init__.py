"""The HTS algorithm without processes: the engine's (replica, step) bookkeeping, the policy's
fixed-shape step, the transition's layout, per-replica noise and seeds."""

"""The HTS-RL paper's figures on this machine (Liu et al., NeurIPS 2020)."""

# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# (ch-location-scale)=
# # Location-scale families: one interval for every parameter
#
# Paper: Section 5.2, Theorem 3.
#
# This chapter is being written; see the issue tracker.

# %% tags=["parameters"]
mode = "quick"  # "quick" or "full"
seed = 2023

# %%
import matplotlib.pyplot as plt
import numpy as np

assert mode in ("quick", "full"), mode
t = np.linspace(0.0, 1.0, 50)
fig, ax = plt.subplots(figsize=(5, 2.5))
ax.plot(t, t**2)
ax.set(title="placeholder figure", xlabel="t")
plt.show()

"""Fill hnplan's on-disk cache of predictions ahead of use (``make``'s environment step): the published training
runs and hnplan's speed error on each, read by a comparison's trust notes, and the grid points of the claims the
planners decide (:func:`hnplan.planning.prediction_cache.seed`). The cache folder is ``$HNPLAN_CACHE_DIR``, else
``$XDG_CACHE_HOME/hnplan``, else ``~/.cache/hnplan``; ``HNPLAN_NO_CACHE=1`` makes this a no-op."""

from hnplan.planning.prediction_cache import cache_dir, seed

if __name__ == "__main__":
    n = seed()
    print(
        f"{cache_dir()}: {n['runs']} published runs, {n['speed_errors']} speed errors, "
        f"{n['plan_points']} grid points of {n['claims']} claims"
    )

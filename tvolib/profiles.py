"""TEMPORARY shim, removed at integration."""
from tvolib.paper.profiles import *  # noqa: F401,F403
from tvolib.paper.profiles import DEFAULT_PROFILE, PROFILES, PCFGScale, Profile, get_profile  # noqa: F401
from tvolib.runs.cost import *  # noqa: F401,F403

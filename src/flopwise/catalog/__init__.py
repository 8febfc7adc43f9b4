"""The embedded catalog (accelerators, systems, models, offers, published runs) and overlays."""

from flopwise.catalog._files import CatalogError, data_dir, flopwise_home, overlay_dir
from flopwise.catalog.accelerators import Accelerator, Sourced, get_accelerator, load_accelerators
from flopwise.catalog.models import ModelEntry, load_model_index, resolve_model_config
from flopwise.catalog.systems import System, get_system, load_systems, systems_for

__all__ = [
    "Accelerator",
    "CatalogError",
    "ModelEntry",
    "Sourced",
    "System",
    "data_dir",
    "flopwise_home",
    "get_accelerator",
    "get_system",
    "load_accelerators",
    "load_model_index",
    "load_systems",
    "overlay_dir",
    "resolve_model_config",
    "systems_for",
]

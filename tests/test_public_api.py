"""The compact public API: ``import dpbook`` is cheap and gives the chapters' names."""

import importlib
import inspect
import subprocess
import sys

import pytest

import dpbook
from dpbook.model.families import LocationScaleFamily


def test_import_dpbook_compiles_nothing():
    # the names load on first use: importing the package pulls in neither numba nor numpy
    out = subprocess.run([sys.executable, "-c", "import sys, dpbook; "
                          "print(sorted({'numba', 'numpy'} & set(sys.modules)))"],
                         capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


@pytest.mark.parametrize("name", dpbook.__all__)
def test_each_public_name_is_its_subpackage_s_object(name):
    module = importlib.import_module(dpbook._WHERE[name])
    assert getattr(dpbook, name) is getattr(module, name)
    assert name in dir(dpbook)


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'smc_posterir'"):
        dpbook.smc_posterir  # noqa: B018


def test_subpackages_stay_modules():
    # a public name never shadows a subpackage of the same name
    import dpbook.mhaar
    assert inspect.ismodule(dpbook.mhaar) and not set(dpbook.__all__) & {
        m.name for m in __import__("pkgutil").iter_modules(dpbook.__path__)}


@pytest.mark.parametrize("method", ["base_logpdf", "base_dlogpdf", "base_cdf", "base_sf",
                                    "base_ppf", "base_sample"])
def test_help_explains_each_base_method_also_on_a_subclass(method):
    class Mine(LocationScaleFamily):
        def base_logpdf(self, z):
            return -z

    # what help() shows, on the base class and on a family's own override
    for doc in (inspect.getdoc(getattr(LocationScaleFamily, method)),
                inspect.getdoc(getattr(Mine(), method))):
        assert doc and len(doc.split()) >= 12, method

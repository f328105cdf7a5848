"""Packaging for dew_rl, driven by settings.ini (the nbdev 2 configuration).

Written here instead of nbdev's template: the template has no Python 3.11 classifier and
crashes with `min_python = 3.11` (its version list has no 3.11).
"""
from configparser import ConfigParser
from pathlib import Path

import setuptools

here = Path(__file__).parent
cfg = ConfigParser(delimiters=["="])
cfg.read(here / "settings.ini", encoding="utf-8")
cfg = cfg["DEFAULT"]

readme = here / "README.md"
setuptools.setup(
    name=cfg["lib_name"],
    version=cfg["version"],
    description=cfg["description"],
    long_description=readme.read_text(encoding="utf-8") if readme.exists() else "",
    long_description_content_type="text/markdown",
    author=cfg["author"],
    author_email=cfg["author_email"],
    license="MIT",
    url=cfg["git_url"],
    keywords=cfg["keywords"].split(),
    packages=setuptools.find_packages(include=["dew_rl", "dew_rl.*"]),
    python_requires=f">={cfg['min_python']}",
    install_requires=cfg["requirements"].split(),
    extras_require={"dev": cfg["dev_requirements"].split(), "tunix": cfg["tunix_requirements"].split()},
    classifiers=[
        "Development Status :: 3 - Alpha",
        "Intended Audience :: Science/Research",
        "License :: OSI Approved :: MIT License",
        "Programming Language :: Python :: 3",
        "Programming Language :: Python :: 3.11",
        "Topic :: Scientific/Engineering :: Artificial Intelligence",
    ],
    zip_safe=False,
)

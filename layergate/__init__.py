"""layergate, the one installed package. Its parts are the repository's top-level folders
`harness`, `exporters` and `reference_engine`, linked here in the checkout and carried as
files in the sdist and the wheel, so an install occupies no name but `layergate`
(docs/ARCHITECTURE.md, "One installed package")."""

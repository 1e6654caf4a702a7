"""The Flux task layer: :class:`~flux_chroma.tasks.task.ChromaTask`, its options, the built-in
tasks (:mod:`~flux_chroma.tasks.builtin`), and the validation, write and read paths.

Nothing here is imported eagerly; import the module you need (or use :mod:`flux_chroma`).
"""

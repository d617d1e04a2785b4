"""The kernel zoo: one `@gpu` kernel per file, and `zoo.table`, which writes zoo/README.md."""

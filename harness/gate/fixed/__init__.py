"""The fixed gate: one look at a finished run. Every figure computed over all its requests
(bootstrap intervals at a sample size fixed in advance), each policy rule applied to its
figure, and the candidates of a run judged together at an adjusted confidence."""

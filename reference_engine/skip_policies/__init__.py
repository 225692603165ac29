"""Skip policies: which decoder layers a request executes, and how it decodes (`full`,
`static`, `dynamic`, `speculative`; `base.SkipPolicy` says what one is).

Nothing is imported here, so the registry's names (`registry.skip_policy_names`) can be read
without torch; `registry.get_skip_policy` loads a policy's module when it is first used.
"""

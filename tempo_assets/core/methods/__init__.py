"""External methods: fence, registry, bundle, run, output, eligibility, CAFA submission."""

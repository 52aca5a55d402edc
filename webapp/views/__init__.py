"""One blueprint per area: home, corpora, jobs here; tokenisers and the API by their owners."""

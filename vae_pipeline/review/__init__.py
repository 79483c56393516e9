"""The review site's server and templates (its pages are made by `domain.review_site`, its asset is `assets.review_site`)."""

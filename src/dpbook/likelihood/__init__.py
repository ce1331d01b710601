"""The likelihood of one release, p^eps_{l,r}(y | theta) (the factor of eq. 5 with x
integrated out), its score (Fisher's identity, Appendix C) and the exact Fisher
information of eq. (7): closed form for the normal family with the Laplace mechanism
(:mod:`~dpbook.likelihood.normal_laplace`), quadrature for any family and mechanism
(:mod:`~dpbook.likelihood.quadrature`)."""

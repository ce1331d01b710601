"""The privacy side of Algorithm 1: the population that alone sees the sensitive values
(the boundary behind Proposition 1 and Theorem 1), the individuals' releases, the
curator and the interval policies of Section 5.  The loop itself is
:func:`dpbook.online.run_online`."""

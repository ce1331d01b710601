"""The privacy side of Algorithm 1: the population that alone sees the sensitive values
(the boundary behind Proposition 1 and Theorem 1), the online loop, and the interval
policies of Section 5."""

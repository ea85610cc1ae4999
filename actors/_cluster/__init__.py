"""Multi-host: the authenticated TCP transport, the cluster key, the join check and the member
(``audition worker``) program.
"""

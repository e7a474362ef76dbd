"""The shipped learner programs (``alpha.learner.program``): ``mlp`` and ``linear``, each a
module of the four functions a learner module defines, in contract arithmetic."""

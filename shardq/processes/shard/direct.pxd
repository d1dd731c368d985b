# For the compiled build of direct.py (Cython reads this beside direct.py; the pure build
# ignores it): a put's reply made by a C call.
from shardq.protocol.replies cimport put_reply

"""What the protocol front-ends (Kestrel, Workq) share: a session per client with a private
beanstalk connection to the server, commands run as tasks, and the epoll loop that moves
them (session.py, loop.py)."""

-- A thread's history as a tree (use_cases/branches.py): the message a message
-- follows on its branch (NULL: the one stored before it, as every message of a
-- thread that never branched), and the current branch's last message once a
-- thread has branches (NULL: its history is one line).
ALTER TABLE messages ADD COLUMN parent_id uuid;
ALTER TABLE threads ADD COLUMN head_id uuid;

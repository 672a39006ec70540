-- Nodes served by a remote agent (`labpool agent`): the address orders go to. NULL for the
-- controller's own in-process node. After a restart the controller waits node_timeout for
-- each such node to register again before it declares it DOWN.
ALTER TABLE nodes ADD COLUMN agent TEXT;

-- The reaction a running turn shows on its request ("working"), by Feishu's reaction
-- id: kept until it is removed, so that a turn ended by recovery after a restart, or
-- by another replica, still has it taken off. The index finds ended turns whose
-- reaction is still to be removed.
ALTER TABLE turns ADD COLUMN working_reaction_id TEXT;
CREATE INDEX turns_working_reaction ON turns (id) WHERE working_reaction_id IS NOT NULL;

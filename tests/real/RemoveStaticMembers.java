/* RemoveStaticMembers.java — what an operator runs after shutting a static
 * member down for good (docs/guide.md, "Static membership"): Kafka's Java
 * AdminClient removes the members with these group.instance.ids from the
 * group (LeaveGroup on their behalf), and the group hands their partitions
 * to the members still running at once, instead of after session.timeout.ms.
 * librdkafka 2.0.2 has no such call, and kafka-consumer-groups.sh (Kafka
 * 4.1) no such option. A single-file Java program, run without compiling:
 *
 *   java -cp '<kafka>/libs/*' tests/real/RemoveStaticMembers.java \
 *        BOOTSTRAP GROUP GROUP_INSTANCE_ID...
 *
 * (<kafka>/libs is a Kafka distribution's jars, .cache/kafka/libs here).
 * Exit 0 when every member was removed; 1 with the broker's reason (an id
 * that is not a member: UNKNOWN_MEMBER_ID); 2 on bad usage. */
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.ExecutionException;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.MemberToRemove;
import org.apache.kafka.clients.admin.RemoveMembersFromConsumerGroupOptions;

public class RemoveStaticMembers {
    public static void main(String[] args) throws InterruptedException {
        if (args.length < 3) {
            System.err.println("usage: RemoveStaticMembers BOOTSTRAP GROUP GROUP_INSTANCE_ID...");
            System.exit(2);
        }
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        List<MemberToRemove> members = new ArrayList<>();
        for (int i = 2; i < args.length; i++) members.add(new MemberToRemove(args[i]));
        try (Admin admin = Admin.create(props)) {
            admin.removeMembersFromConsumerGroup(args[1], new RemoveMembersFromConsumerGroupOptions(members)).all().get();
            for (int i = 2; i < args.length; i++)
                System.out.println("removed static member " + args[i] + " from group " + args[1]);
        } catch (ExecutionException e) {
            System.err.println("RemoveStaticMembers: group " + args[1] + ": " + e.getCause());
            System.exit(1);
        }
    }
}
